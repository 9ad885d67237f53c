import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

/**
 * The layering rules of eslint.config.js, proved by linting virtual files (`lintText` with a
 * `filePath` in the folder under test) with the project's own config: each rule must refuse an
 * import that crosses it, and let through the imports the layering allows.
 */
const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const eslint = new ESLint({ cwd: ROOT });

/** The no-restricted-imports messages ESLint gives `file` (relative to the root) holding `code`. */
async function layeringErrors(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(ROOT, file) });
  expect(result!.messages.filter((m) => m.fatal)).toEqual([]);
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

const importing = (from: string) => `import { x } from '${from}';\nexport const y = x;\n`;
const importingType = (from: string) => `import type { T } from '${from}';\nexport type U = T;\n`;
const reExporting = (from: string) => `export { x } from '${from}';\n`;

async function refused(file: string, code: string, message: RegExp): Promise<void> {
  const errors = await layeringErrors(file, code);
  expect(errors, `${file}: ${code}`).toHaveLength(1);
  expect(errors[0]).toMatch(message);
}

async function allowed(file: string, code: string): Promise<void> {
  expect(await layeringErrors(file, code), `${file}: ${code}`).toEqual([]);
}

/** Top-level folders that hold TypeScript (ours), agent/ included even before it exists. */
function ourFolders(): string[] {
  const hasTs = (dir: string): boolean =>
    readdirSync(dir, { withFileTypes: true }).some((e) =>
      e.isDirectory() ? e.name !== 'node_modules' && hasTs(path.join(dir, e.name)) : e.name.endsWith('.ts'),
    );
  const found = readdirSync(ROOT, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'data', 'coverage'].includes(e.name))
    .map((e) => e.name)
    .filter((name) => hasTs(path.join(ROOT, name)));
  return [...new Set([...found, 'agent'])].sort();
}

describe('layering lint: render/ imports nothing of ours except client/format', () => {
  it('refuses core/, api/, clips/, agent/ and the rest of client/, at any depth, as value, type or re-export', async () => {
    await refused('render/x.ts', importing('../core/platform/errors.ts'), /render\/ imports nothing of ours/);
    await refused('render/encode/x.ts', importing('../../core/platform/errors.ts'), /render\//);
    await refused('render/encode/x.ts', importingType('../../clips/declaration/index.ts'), /render\//);
    await refused('render/encode/x.ts', reExporting('../../api/app.ts'), /render\//);
    await refused('render/rig/deep/x.ts', importing('../../../agent/worker.ts'), /render\//);
    await refused('render/encode/x.ts', importing('../../client/index.ts'), /except client\/format\.ts/);
    await refused('render/encode/x.ts', importing('../../client/reader.ts'), /except client\/format\.ts/);
  });

  it('allows client/format.ts, its own folders and packages', async () => {
    await allowed('render/encode/x.ts', importing('../../client/format.ts'));
    await allowed('render/encode/x.ts', importing('../framecache/index.ts'));
    await allowed('render/encode/x.ts', importing('sharp'));
  });

  it("lets render's tests use the client reader, nothing else of ours", async () => {
    await allowed('render/encode/x.test.ts', importing('../../client/index.ts'));
    await refused('render/encode/x.test.ts', importing('../../core/platform/errors.ts'), /render\//);
  });
});

describe('layering lint: clips/ imports nothing of ours', () => {
  it('refuses every other top-level folder of ours', async () => {
    const folders = ourFolders().filter((f) => f !== 'clips');
    expect(folders).toEqual(expect.arrayContaining(['agent', 'api', 'client', 'core', 'render']));
    for (const folder of folders) {
      await refused('clips/declaration/x.ts', importing(`../../${folder}/x.ts`), /clips\/ imports nothing of ours/);
    }
    await refused('clips/declaration/x.ts', importingType('../../core/avatars/types.ts'), /clips\//);
    await refused('clips/x.ts', reExporting('../core/platform/errors.ts'), /clips\//);
    await refused('clips/behavior/x.test.ts', importing('../../test/helpers.ts'), /clips\//);
  });

  it("refuses the HTTP layer's zod (OpenAPI names belong to api/)", async () => {
    await refused('clips/declaration/x.ts', importing('@hono/zod-openapi'), /plain zod/);
  });

  it('allows its own folders and packages', async () => {
    await allowed('clips/declaration/x.ts', importing('../behavior/types.ts'));
    await allowed('clips/declaration/x.ts', importing('./limits.ts'));
    await allowed('clips/declaration/x.ts', importing('zod'));
  });
});

describe('layering lint: client/ is published alone and runs in browsers', () => {
  it('refuses imports of ours outside client/ and Node built-ins', async () => {
    await refused('client/x.ts', importing('../core/platform/errors.ts'), /client\/ is published alone/);
    await refused('client/x.ts', importingType('../render/encode/index.ts'), /client\/ is published alone/);
    await refused('client/x.ts', importing('node:fs'), /no Node built-ins/);
    await refused('client/x.ts', importing('crypto'), /no Node built-ins/);
  });

  it('allows its own files and packages, and lets its tests use the rest of the repository', async () => {
    await allowed('client/x.ts', importing('./reader.ts'));
    await allowed('client/x.test.ts', importing('../api/server.ts'));
    await allowed('client/x.test.ts', importing('node:http'));
  });
});

describe('layering lint: dashboard/ is browser code that calls the API through client/', () => {
  it('refuses every folder of ours but client/, and Node built-ins', async () => {
    await refused('dashboard/pages/x.tsx', importing('../../api/dashboard/session.ts'), /dashboard\/ is browser code/);
    await refused('dashboard/x.ts', importingType('../core/dashboard/auth.ts'), /dashboard\/ is browser code/);
    await refused('dashboard/x.ts', importing('node:crypto'), /no Node built-ins/);
  });

  it('allows client/, its own files and packages', async () => {
    await allowed('dashboard/pages/x.tsx', importing('../../client/index.ts'));
    await allowed('dashboard/x.tsx', importing('./ui.tsx'));
    await allowed('dashboard/x.tsx', importing('react'));
  });
});

describe('layering lint: core/ never imports api/ or agent/', () => {
  it('refuses api/ and agent/', async () => {
    await refused('core/x.ts', importing('../api/app.ts'), /core\/ never imports api\/ or agent\//);
    await refused('core/avatars/x.ts', importing('../../api/errors.ts'), /core\//);
    await refused('core/avatars/x.ts', importingType('../../agent/worker.ts'), /core\//);
    await refused('core/avatars/x.ts', reExporting('../../agent/index.ts'), /core\//);
  });

  it('allows clips/, render/, its own folders; its tests may drive the HTTP API, never agent/', async () => {
    await allowed('core/avatars/x.ts', importing('../../clips/declaration/index.ts'));
    await allowed('core/avatars/x.ts', importing('../../render/rig/index.ts'));
    await allowed('core/avatars/x.ts', importing('../platform/db/index.ts'));
    await allowed('core/wiring/x.test.ts', importing('../../api/routes/avatars/test-support.ts'));
    await refused('core/wiring/x.test.ts', importing('../../agent/worker.ts'), /core\/ never imports agent\//);
  });
});

describe('layering lint: core/platform/ imports no domain of core/', () => {
  it('refuses the domains and the wiring, at any depth, as value, type or re-export', async () => {
    const message = /core\/platform\/ imports no domain of core\//;
    await refused('core/platform/x.ts', importing('../avatars/service.ts'), message);
    await refused('core/platform/db/x.ts', importingType('../../live/sessions.ts'), message);
    await refused('core/platform/jobs/x.ts', reExporting('../../wiring/services.ts'), message);
    await refused('core/platform/x.ts', importing('../usage.ts'), message);
    await refused('core/platform/x.ts', importing('../../api/app.ts'), /core\/ never imports api\//);
  });

  it('allows its own folders, clips/ and render/; the domains use it', async () => {
    await allowed('core/platform/db/x.ts', importing('../config.ts'));
    await allowed('core/platform/jobs/x.ts', importing('../db/index.ts'));
    await allowed('core/platform/storage/x.ts', importing('../../../render/framecache/format.ts'));
    await allowed('core/avatars/x.ts', importing('../platform/jobs/index.ts'));
    await allowed('core/wiring/x.ts', importing('../avatars/service.ts'));
  });
});

describe('layering lint: api/ and agent/ never import each other', () => {
  it('refuses api/ -> agent/ and agent/ -> api/', async () => {
    await refused('api/routes/avatars/x.ts', importing('../../../agent/worker.ts'), /api\/ never imports agent\//);
    await refused('api/x.test.ts', importing('../agent/worker.ts'), /api\//);
    await refused('agent/x.ts', importing('../api/app.ts'), /agent\/ never imports api\//);
    await refused('agent/session/x.ts', importingType('../../api/context.ts'), /agent\//);
  });

  it('allows both to use core/, clips/ and render/', async () => {
    for (const file of ['api/routes/x.ts', 'agent/session/x.ts']) {
      await allowed(file, importing('../../core/platform/errors.ts'));
      await allowed(file, importing('../../clips/behavior/index.ts'));
      await allowed(file, importing('../../render/tts/index.ts'));
    }
  });
});

describe('layering lint: production code never imports test/, bench/ or cli/', () => {
  it('refuses them from api/, agent/ and core/ code', async () => {
    for (const [file, up] of [
      ['api/routes/avatars/x.ts', '../../../'],
      ['agent/avatar/x.ts', '../../'],
      ['core/avatars/x.ts', '../../'],
    ] as const) {
      for (const folder of ['test/helpers.ts', 'bench/run.ts', 'cli/admin.ts']) {
        await refused(file, importing(`${up}${folder}`), /production code never imports test\/, bench\/ or cli\//);
      }
    }
    // The folder rules still hold beside it.
    await refused('api/routes/avatars/x.ts', importing('../../../agent/worker.ts'), /api\/ never imports agent\//);
    await refused('core/avatars/x.ts', importing('../../api/errors.ts'), /core\//);
  });

  it('lets tests and the test-support.ts modules beside them use the test harness', async () => {
    await allowed('api/routes/avatars/x.test.ts', importing('../../../test/helpers.ts'));
    await allowed('api/routes/avatars/test-support.ts', importing('../../../test/helpers.ts'));
    await allowed('agent/test-support.ts', importing('../test/helpers.ts'));
    await allowed('core/avatars/x.test.ts', importing('../../test/helpers.ts'));
    await refused('agent/test-support.ts', importing('../api/app.ts'), /agent\/ never imports api\//);
  });
});
