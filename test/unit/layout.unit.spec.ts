/**
 * The layout's arrows point down: every import of src/**\/*.ts (static `from '…'`, `import '…'` and dynamic
 * `import('…')`, type-only ones too) goes to its own folder or to one its folder may import. The table is written
 * here once; docs/architecture.md, "Layout", shows the same table to readers (the last test compares them).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../support/children.js';
import { sectionOf, tableRows } from '../support/markdown.js';

/** Each folder of src/ and the folders it may import besides itself, from the top of the house down. */
const MAY_IMPORT: Readonly<Record<string, readonly string[]>> = {
  cli: ['wiring', 'relay', 'commands', 'send', 'account', 'telemetry', 'store', 'simulator', 'reconcile', 'contract', 'events', 'shared', 'json'],
  wiring: ['relay', 'commands', 'send', 'account', 'telemetry', 'store', 'simulator', 'reconcile', 'events', 'shared', 'json'],
  relay: ['commands', 'send', 'account', 'telemetry', 'contract', 'events', 'shared', 'json'],
  commands: ['send', 'account', 'telemetry', 'projections', 'reconcile', 'events', 'shared', 'json'],
  send: ['account', 'telemetry', 'events', 'shared', 'json'],
  account: ['telemetry', 'events', 'shared', 'json'],
  telemetry: ['events', 'shared', 'json'],
  store: ['projections', 'events', 'shared', 'json'],
  projections: ['events', 'shared', 'json'],
  reconcile: ['events', 'shared', 'json'],
  client: ['contract', 'events', 'json'],
  contract: ['events', 'shared', 'json'],
  simulator: ['shared', 'json'],
  console: ['shared'],
  events: ['shared', 'json'],
  shared: ['json'],
  json: [],
};

const SRC = join(REPO_ROOT, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** Every module a file names: `import … from '…'`, `export … from '…'`, `import '…'` and `import('…')`. */
function importsOf(text: string): string[] {
  const specifiers: string[] = [];
  const patterns = [
    /(?:^|[\s;])(?:import|export)\s[^'"`;]*?\sfrom\s*['"]([^'"]+)['"]/g,
    /(?:^|[\s;])import\s*['"]([^'"]+)['"]/g,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  for (const pattern of patterns) for (const m of text.matchAll(pattern)) specifiers.push(m[1]!);
  return specifiers;
}

/** The folder of src/ a path lies in (`relay` for src/relay/auth/keyRing.ts); null for a file directly in src/. */
function folderOf(path: string): string | null {
  const parts = relative(SRC, path).split(sep);
  return parts.length > 1 ? parts[0]! : null;
}

/** `file: import 'specifier' (folder → folder)` for each import the table does not allow. */
function upwardImports(files: ReadonlyArray<{ path: string; text: string }>, mayImport: Readonly<Record<string, readonly string[]>>): string[] {
  const wrong: string[] = [];
  for (const { path, text } of files) {
    const from = folderOf(path);
    const shown = relative(REPO_ROOT, path);
    if (from === null) {
      wrong.push(`${shown}: a file directly in src/ (put it in the folder of its job)`);
      continue;
    }
    const allowed = mayImport[from];
    if (allowed === undefined) {
      wrong.push(`${shown}: src/${from} is not in the layout table (test/unit/layout.unit.spec.ts and docs/architecture.md)`);
      continue;
    }
    for (const specifier of importsOf(text)) {
      if (!specifier.startsWith('.')) continue; // a package or node: module
      const target = resolve(dirname(path), specifier);
      const to = target.startsWith(SRC + sep) ? folderOf(target) : 'outside src';
      if (to === from || (to !== null && allowed.includes(to))) continue;
      wrong.push(`${shown}: import '${specifier}' (src/${from} may not import ${to === null ? 'a file directly in src/' : to === 'outside src' ? 'outside src/' : `src/${to}`})`);
    }
  }
  return wrong;
}

/**
 * The circles among files: each as `a.ts → b.ts → a.ts`, relative to src/. Type-only imports count too: a circle
 * of types is still two modules that cannot be read, or moved, one without the other.
 */
function fileCircles(files: ReadonlyArray<{ path: string; text: string }>): string[] {
  const known = new Set(files.map((f) => f.path));
  const edges = new Map(
    files.map(({ path, text }) => [
      path,
      importsOf(text)
        .filter((specifier) => specifier.startsWith('.'))
        .map((specifier) => resolve(dirname(path), specifier).replace(/\.js$/, '.ts'))
        .filter((target) => known.has(target)),
    ]),
  );
  const done = new Set<string>();
  const circles: string[] = [];
  const visit = (path: string, trail: string[]): void => {
    const at = trail.indexOf(path);
    if (at >= 0) {
      circles.push([...trail.slice(at), path].map((p) => relative(SRC, p)).join(' → '));
      return;
    }
    if (done.has(path)) return;
    for (const next of edges.get(path) ?? []) visit(next, [...trail, path]);
    done.add(path);
  };
  for (const path of known) visit(path, []);
  return circles;
}

describe('the layout: every import points down', () => {
  const files = sourceFiles(SRC).map((path) => ({ path, text: readFileSync(path, 'utf8') }));

  it('reads the imports of every kind', () => {
    const text = [
      "import type { A } from '../a/x.js';",
      "import {\n  b,\n  c,\n} from './b.js';",
      "export { d } from '../d/y.js';",
      "import './side.js';",
      "const m = await import('../e/z.js');",
      "import { readFileSync } from 'node:fs';",
    ].join('\n');
    expect(importsOf(text)).toEqual(['../a/x.js', './b.js', '../d/y.js', 'node:fs', './side.js', '../e/z.js']);
    expect(files.length).toBeGreaterThan(100);
  });

  it('finds an upward import, and names the file and the import', () => {
    const path = join(SRC, 'commands', 'resolve.ts');
    expect(upwardImports([{ path, text: "import { buildApp } from '../relay/app.js';" }], MAY_IMPORT)).toEqual([
      "src/commands/resolve.ts: import '../relay/app.js' (src/commands may not import src/relay)",
    ]);
    expect(upwardImports([{ path, text: "const { serve } = await import('../wiring/serve.js');" }], MAY_IMPORT)).toHaveLength(1);
    expect(upwardImports([{ path: join(SRC, 'stray.ts'), text: '' }], MAY_IMPORT)).toHaveLength(1);
  });

  it('src/ has no import the table does not allow (and prints the arrows it found)', () => {
    expect(upwardImports(files, MAY_IMPORT)).toEqual([]);
    const arrows = new Map<string, Set<string>>();
    for (const { path, text } of files) {
      const from = folderOf(path)!;
      const to = arrows.get(from) ?? new Set<string>();
      arrows.set(from, to);
      for (const specifier of importsOf(text)) {
        const target = specifier.startsWith('.') ? folderOf(resolve(dirname(path), specifier)) : null;
        if (target !== null && target !== from) to.add(target);
      }
    }
    const order = Object.keys(MAY_IMPORT);
    const lines = order.map((folder) => `src/${folder} → ${[...(arrows.get(folder) ?? [])].sort((a, b) => order.indexOf(a) - order.indexOf(b)).join(', ') || '(nothing)'}`);
    console.info(`the arrows of src/, from the top of the house down:\n${lines.join('\n')}`);
  });

  it('no file imports itself back, through any chain of imports', () => {
    const a = join(SRC, 'reconcile', 'format', 'report.ts');
    const b = join(SRC, 'reconcile', 'format', 'csvReport.ts');
    expect(fileCircles([{ path: a, text: "import { csvReport } from './csvReport.js';" }, { path: b, text: "import type { ReportWriter } from './report.js';" }])).toEqual([
      'reconcile/format/report.ts → reconcile/format/csvReport.ts → reconcile/format/report.ts',
    ]);
    expect(fileCircles(files)).toEqual([]);
  });

  it('the table has no circle: each folder imports only folders listed after it', () => {
    const order = Object.keys(MAY_IMPORT);
    const back = Object.entries(MAY_IMPORT).flatMap(([from, tos]) => tos.filter((to) => order.indexOf(to) <= order.indexOf(from)).map((to) => `${from} → ${to}`));
    expect(back).toEqual([]);
    expect(order.sort()).toEqual(readdirSync(SRC).filter((name) => statSync(join(SRC, name)).isDirectory()).sort());
  });

  it('inside src/store: the two stores import neither each other nor src/projections (openStore.ts hands it over); store/shared imports neither store', () => {
    const STORE = join(SRC, 'store');
    const mayNot: Readonly<Record<string, readonly string[]>> = {
      sqlite: [join(STORE, 'postgres'), join(SRC, 'projections')],
      postgres: [join(STORE, 'sqlite'), join(SRC, 'projections')],
      shared: [join(STORE, 'sqlite'), join(STORE, 'postgres'), join(SRC, 'projections')],
    };
    const wrong = files.flatMap(({ path, text }) => {
      const part = relative(STORE, path).split(sep)[0]!;
      const banned = mayNot[part] ?? [];
      return importsOf(text)
        .filter((specifier) => specifier.startsWith('.') && banned.some((dir) => resolve(dirname(path), specifier).startsWith(dir + sep)))
        .map((specifier) => `${relative(REPO_ROOT, path)}: import '${specifier}'`);
    });
    expect(wrong).toEqual([]);
  });

  it('docs/architecture.md shows the same table', () => {
    const rows = tableRows(sectionOf(readFileSync(join(REPO_ROOT, 'docs', 'architecture.md'), 'utf8'), 'Layout'));
    const documented = Object.fromEntries(
      rows.map(([folder = '', , imports = '']) => [
        folder.replace(/`/g, '').replace(/^src\//, ''),
        imports === 'nothing' ? [] : imports.split(',').map((f) => f.replace(/`/g, '').trim()),
      ]),
    );
    expect(documented).toEqual(MAY_IMPORT);
  });
});
