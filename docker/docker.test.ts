import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * What the image is built from and how it runs, checked without a Docker engine: the build context
 * (the repository root, docker/compose.yaml's `context: ..`) as `.dockerignore` filters it, and the
 * Dockerfile's runtime user and data directory.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/**
 * Docker's `.dockerignore` rules, as documented: one pattern a line, `#` comments, a leading `!`
 * re-includes, patterns are cleaned paths relative to the context root (a leading `/` is dropped)
 * matched with Go's filepath.Match (`*` and `?` within one path segment, `[...]` classes) plus `**`
 * for any number of directories; a pattern that matches a directory excludes everything in it, and
 * the last pattern that matches a path decides.
 */
function dockerignore(text: string): (file: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = path.posix
        .normalize((negate ? l.slice(1) : l).trim())
        .replace(/^\/+/, '')
        .replace(/\/+$/, '');
      return { negate, re: globToRegExp(pattern) };
    });
  return (file) => {
    const parts = file.split('/');
    const selfAndParents = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const r of rules) if (selfAndParents.some((p) => r.re.test(p))) excluded = !r.negate;
    return excluded;
  };
}

function globToRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*' && pattern[i + 1] === '*') {
      i++;
      if (pattern[i + 1] === '/') {
        i++;
        re += '(?:.*/)?';
      } else re += '.*';
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 1);
      re += `[${pattern.slice(i + 1, end).replace(/^[!^]/, '^')}]`;
      i = end;
    } else if (c === '\\') re += `\\${pattern[++i] ?? ''}`;
    else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

const ignored = dockerignore(
  existsSync(path.join(ROOT, '.dockerignore')) ? readFileSync(path.join(ROOT, '.dockerignore'), 'utf8') : '',
);
const dockerfile = readFileSync(path.join(ROOT, 'docker/Dockerfile'), 'utf8');
/** The Dockerfile's instructions, continuation lines joined. */
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));

describe('the .dockerignore matcher of this test', () => {
  it("follows the examples of Docker's documentation", () => {
    const m = dockerignore('# comment\n*/temp*\n*/*/temp*\ntemp?\n**/*.go\n*.md\n!README*.md\n/rooted\ndir/\n');
    expect(m('somedir/temporary.txt')).toBe(true);
    expect(m('somedir/temp')).toBe(true);
    expect(m('temp')).toBe(false);
    expect(m('somedir/subdir/temporary.txt')).toBe(true);
    expect(m('tempa')).toBe(true);
    expect(m('tempab')).toBe(false);
    expect(m('main.go')).toBe(true);
    expect(m('a/b/c.go')).toBe(true);
    expect(m('CHANGES.md')).toBe(true);
    expect(m('README-secret.md')).toBe(false);
    expect(m('rooted/file')).toBe(true);
    expect(m('dir/any/file')).toBe(true);
    expect(m('other/dir/file')).toBe(false);
  });
});

describe('the Docker build context', () => {
  it('leaves out local data and secrets, installed modules, git history and environment files', () => {
    for (const file of [
      'data/postgres.json',
      'data/postgres/PG_VERSION',
      'data/media-signing.secret',
      'data/media/tenants/t/assets/a/original.jpg',
      '.data/postgres/base/1/1259',
      'media-signing.secret',
      'some/where/else/media-signing.secret',
      'node_modules/hono/package.json',
      'client/node_modules/x/index.js',
      '.git/HEAD',
      '.git/objects/ab/cdef',
      '.env',
      '.env.production',
      'server.log',
    ]) {
      expect(ignored(file), file).toBe(true);
    }
  });

  it('keeps the sources, the lockfile, the npm configuration and the models the image needs', () => {
    for (const file of [
      'package.json',
      'package-lock.json',
      '.npmrc',
      'tsconfig.json',
      'api/main.ts',
      'api/routes/avatars/create-avatar.ts',
      'core/platform/db/embedded.ts',
      'core/platform/db/migrations/0001_foundation.sql',
      'core/platform/storage/signing.ts',
      'render/rig/models.ts',
      'clips/declaration/schema.ts',
      'client/format.ts',
    ]) {
      expect(ignored(file), file).toBe(false);
    }
    // Everything the Dockerfile copies by name is in the context.
    for (const ins of instructions.filter((l) => /^COPY\s/i.test(l) && !/--from=/i.test(l))) {
      const sources = ins
        .split(/\s+/)
        .slice(1, -1)
        .filter((s) => !s.startsWith('--') && s !== '.');
      for (const s of sources) expect(ignored(s), `${ins}: ${s}`).toBe(false);
    }
  });
});

describe('the Dockerfile', () => {
  const user = instructions
    .filter((l) => /^USER\s/i.test(l))
    .at(-1)
    ?.split(/\s+/)[1];

  it('runs as a non-root user that owns the data directory it is given', () => {
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    const dataDir = /^ENV\s.*\bDATA_DIR=(\S+)/im.exec(instructions.join('\n'))?.[1];
    expect(dataDir).toBe('/data');
    // Created in a RUN before the switch to that user, and handed to it.
    const userAt = instructions.findIndex((l) => /^USER\s/i.test(l));
    const run = instructions.slice(0, userAt).find((l) => /^RUN\s/i.test(l) && /\bmkdir\b[^&;]*\s\/data\b/.test(l));
    expect(run, 'a RUN that creates /data').toBeDefined();
    expect(run).toMatch(new RegExp(`\\bchown\\s+(-R\\s+)?${user!.split(':')[0]}(:\\S+)?\\s+/data\\b`));
  });

  it('runs the server as PID 1 itself, so that docker stop (SIGTERM) reaches its ordered shutdown', () => {
    const cmd = instructions.filter((l) => /^CMD\s/i.test(l)).at(-1);
    const argv = JSON.parse(cmd!.replace(/^CMD\s+/i, '')) as string[];
    expect(argv[0]).toBe('node');
    expect(argv).toContain('api/main.ts');
  });
});
