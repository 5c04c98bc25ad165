import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it, expect } from 'vitest';
import { REPLY_CODES } from '../../src/relay/codes.js';
import { REPO_ROOT } from '../support/children.js';

const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');

describe('the README is true to the code', () => {
  it.each(Object.entries(REPLY_CODES))('documents %s with its HTTP status', (code, { http }) => {
    const row = readme.split('\n').find((l) => l.startsWith(`| \`${code}\``));
    expect(row, `README has no row for ${code}`).toBeDefined();
    expect(row).toContain(String(http));
  });
  it('shows the two commands', () => {
    expect(readme).toContain('npm install && npm start');
    expect(readme).toContain('npm install && npm test');
  });
});
