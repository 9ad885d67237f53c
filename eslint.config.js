import { readdirSync } from 'node:fs';
import { fileURLToPath, URL } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layering (README "Layout"): api/ and agent/ use core/, clips/ and render/, never each other;
 * core/ never imports api/ or agent/; render/ imports nothing of ours except client/format.ts;
 * clips/ imports nothing of ours.
 *
 * Our imports are relative, so a rule matches the top-level folder an import climbs into
 * (`../../core/platform/errors.ts`), whatever the depth of the importing file. OUR_FOLDERS lists every
 * top-level folder of ours (agent/ is reserved for the LiveKit agent worker); test/layering.test.ts
 * fails when a folder holding TypeScript is missing from it.
 */
const OUR_FOLDERS = [
  'agent',
  'api',
  'bench',
  'cli',
  'client',
  'clips',
  'core',
  'dashboard',
  'docker',
  'docs',
  'render',
  'scripts',
  'test',
];

/** A no-restricted-imports pattern: any import that climbs into one of `folders`. */
function climbsInto(folders, message) {
  return { regex: `^(\\./)?(\\.\\./)+(${folders.join('|')})(/|$)`, message };
}

const RENDER_IMPORTS = 'render/ imports nothing of ours except client/format.ts';
const renderOutside = climbsInto(
  OUR_FOLDERS.filter((f) => f !== 'render' && f !== 'client'),
  RENDER_IMPORTS,
);
const renderClient = { regex: '^(\\./)?(\\.\\./)+client(/(?!format\\.ts$)|$)', message: RENDER_IMPORTS };
// core/platform/ is the infrastructure (config, db, storage, jobs, coordination...): the domains of
// core/ build on it, never the other way round. Every other entry of core/ is a domain or the wiring.
const CORE_PARTS = readdirSync(fileURLToPath(new URL('./core', import.meta.url)), { withFileTypes: true })
  .filter((e) => e.name !== 'platform' && (e.isDirectory() || e.name.endsWith('.ts')))
  .map((e) => e.name.replace(/\.ts$/, '(\\.ts)?'));
const platformToDomain = climbsInto(
  CORE_PARTS,
  'core/platform/ imports no domain of core/ and not the wiring: they build on it',
);
const coreUp = climbsInto(['api', 'agent'], 'core/ never imports api/ or agent/ (they build on core)');
const apiToAgent = climbsInto(['agent'], 'api/ never imports agent/: both build on core/, clips/ and render/');
const agentToApi = climbsInto(['api'], 'agent/ never imports api/: both build on core/, clips/ and render/');

// ONNX Runtime's telemetry is turned off before it loads (render/onnx/runtime.ts); types are free.
const ortDirect = {
  name: 'onnxruntime-node',
  allowTypeImports: true,
  message: 'import ort from render/onnx/runtime.ts: it loads ONNX Runtime with its telemetry off',
};

const layers = (files, patterns, paths = [], ignores = []) => ({
  files,
  ignores,
  rules: { 'no-restricted-imports': ['error', { patterns, paths }] },
});

// Production code never reaches into the test harness, the benchmarks or the CLI: only tests and
// the test-support.ts modules beside them do (render/, clips/ and client/ refuse every folder of ours already).
const NOT_PRODUCTION = ['**/*.test.ts', '**/test-support.ts'];
const toolsOut = climbsInto(
  ['test', 'bench', 'cli'],
  'production code never imports test/, bench/ or cli/ (tests and test-support.ts modules may)',
);

export default tseslint.config(
  { ignores: ['node_modules/', 'data/', '**/dist/', 'coverage/', '**/*.py'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': ['error', { allow: ['error'] }],
    },
  },
  // `npm run lint` fails on errors only: every rule is an error except this one, a nudge shown on each
  // run (long functions are where a newcomer gets lost; tests' describe blocks are exempt).
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  {
    ignores: NOT_PRODUCTION,
    rules: { 'max-lines-per-function': ['warn', { max: 100, skipBlankLines: true, skipComments: true }] },
  },
  {
    files: ['cli/**', 'bench/**', 'scripts/**', 'render/cli/**'],
    rules: { 'no-console': 'off' },
  },
  // Layering. A later block for the same files replaces the earlier one's patterns, so each
  // exemption restates what still holds.
  layers(['render/**'], [renderOutside, renderClient], [ortDirect]),
  // Render's tests read what render writes with the real client reader (the round trip a user relies on).
  layers(['render/**/*.test.ts'], [renderOutside], [ortDirect]),
  layers(['render/onnx/runtime.ts'], [renderOutside, renderClient]),
  layers(
    ['clips/**'],
    [
      climbsInto(
        OUR_FOLDERS.filter((f) => f !== 'clips'),
        'clips/ imports nothing of ours: it is pure logic shared by api/ and agent/',
      ),
    ],
    [{ name: '@hono/zod-openapi', message: 'clips/ uses plain zod: OpenAPI names belong to api/' }],
  ),
  // The client library is published on its own and loaded by browsers: nothing of ours outside
  // client/, and no Node built-ins (its tests, run in Node against the real API, may use both).
  {
    files: ['client/**'],
    ignores: ['client/**/*.test.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            climbsInto(
              OUR_FOLDERS.filter((f) => f !== 'client'),
              'client/ is published alone: it imports nothing of ours outside client/',
            ),
            { regex: '^node:', message: 'client/ runs in browsers: no Node built-ins' },
          ],
          paths: [
            'fs',
            'path',
            'os',
            'crypto',
            'stream',
            'buffer',
            'http',
            'https',
            'net',
            'url',
            'util',
            'child_process',
          ].map((name) => ({ name, message: 'client/ runs in browsers: no Node built-ins' })),
        },
      ],
    },
  },
  // The dashboard's browser code (bundled by api/dashboard/bundle.ts) calls the API through the
  // client library, as any browser app would: nothing else of ours.
  layers(
    ['dashboard/**'],
    [
      climbsInto(
        OUR_FOLDERS.filter((f) => f !== 'dashboard' && f !== 'client'),
        'dashboard/ is browser code: it imports only client/ of ours (the API through the client library)',
      ),
      { regex: '^node:', message: 'dashboard/ runs in browsers: no Node built-ins' },
    ],
  ),
  layers(['core/**'], [coreUp, toolsOut], [], NOT_PRODUCTION),
  layers(['core/platform/**'], [coreUp, toolsOut, platformToDomain], [], NOT_PRODUCTION),
  layers(['core/**/test-support.ts'], [coreUp]),
  // Core's integration tests drive the services through the HTTP API, as a user does (test/helpers
  // testApi, api test support); they still never import agent/.
  layers(['core/**/*.test.ts'], [climbsInto(['agent'], 'core/ never imports agent/')]),
  layers(['api/**'], [apiToAgent, toolsOut], [], NOT_PRODUCTION),
  layers(
    NOT_PRODUCTION.map((p) => `api/${p}`),
    [apiToAgent],
  ),
  layers(['agent/**'], [agentToApi, toolsOut], [], NOT_PRODUCTION),
  layers(
    NOT_PRODUCTION.map((p) => `agent/${p}`),
    [agentToApi],
  ),
);
