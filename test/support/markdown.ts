/**
 * Just enough Markdown for the docs tests: the headings, anchors, links and table rows of README.md and
 * docs/*.md as GitHub renders them. Text inside fenced code blocks is neither a heading nor a link (a `#` comment
 * in a shell example is not a section).
 */

export interface Line {
  readonly text: string;
  /** 1-based, for messages. */
  readonly number: number;
}

/** The lines outside fenced code blocks (``` or ~~~). */
export function proseLines(markdown: string): Line[] {
  const lines: Line[] = [];
  let fence: string | null = null;
  markdown.split('\n').forEach((text, i) => {
    const opener = /^\s{0,3}(`{3,}|~{3,})/.exec(text)?.[1];
    if (fence === null && opener !== undefined) fence = opener;
    else if (fence !== null && text.trim().startsWith(fence)) fence = null;
    else if (fence === null) lines.push({ text, number: i + 1 });
  });
  return lines;
}

const HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;

/**
 * GitHub's anchor for a heading (as github-slugger makes it): the rendered text (code spans and links reduced
 * to their text) in lower case, every character that is not a letter, a digit, a mark, `_`, `-` or a space
 * dropped, each space made `-`.
 */
export function githubAnchor(heading: string): string {
  const rendered = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/`([^`]*)`/g, '$1')
    .replace(/<[^>]+>/g, '');
  return rendered.toLowerCase().replace(/[^\p{L}\p{M}\p{N}_\- ]/gu, '').replace(/ /g, '-');
}

/** Every anchor a page has: its headings' (a repeated one gets `-1`, `-2`, … as on GitHub) and `<a id|name>`. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const { text } of proseLines(markdown)) {
    const heading = HEADING.exec(text)?.[2];
    if (heading !== undefined) {
      const base = githubAnchor(heading);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]!);
  }
  return anchors;
}

export interface Link {
  readonly target: string;
  readonly line: number;
}

/** The targets of the page's links and images, outside code (a code span's brackets are not a link). */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  for (const { text, number } of proseLines(markdown)) {
    const withoutCode = text.replace(/`[^`]*`/g, 'code');
    for (const m of withoutCode.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ target: m[1]!, line: number });
    }
  }
  return links;
}

/**
 * The prose directly under the first heading whose text is `heading` (any level), up to the next heading of any
 * level. Throws when there is no such heading, so that a renamed section fails its test loudly.
 */
export function sectionOf(markdown: string, heading: string): Line[] {
  const lines = proseLines(markdown);
  const start = lines.findIndex((l) => HEADING.exec(l.text)?.[2] === heading);
  if (start < 0) throw new Error(`no heading "${heading}"`);
  const rest = lines.slice(start + 1);
  const end = rest.findIndex((l) => HEADING.test(l.text));
  return end < 0 ? rest : rest.slice(0, end);
}

/** The body rows of the Markdown tables in `lines`, each as its trimmed cells (`\|` kept inside a cell). */
export function tableRows(lines: readonly Line[]): string[][] {
  const rows: string[][] = [];
  let header = true;
  for (const { text } of lines) {
    if (!text.startsWith('|')) {
      header = true;
      continue;
    }
    if (/^\|[\s|:-]+\|$/.test(text)) continue;
    if (header) {
      header = false;
      continue;
    }
    rows.push(text.slice(1, text.endsWith('|') ? -1 : undefined).split(/(?<!\\)\|/).map((c) => c.trim()));
  }
  return rows;
}
