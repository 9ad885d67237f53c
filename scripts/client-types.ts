/**
 * `npm run client:types`: builds the API's OpenAPI document (api/app.ts, exactly what /openapi.json
 * serves) and generates the client library's types and operation table from it:
 *
 * - client/openapi.ts: request and response types of every operation (openapi-typescript);
 * - client/operations.ts: each operation's method, path and body kind, for the client at run time.
 *
 * Run it after changing a route; a test (scripts/client-types.test.ts) fails while the committed
 * files are stale. Operations the API declares (api/scopes.ts) before their route lands are listed
 * in PLANNED with their method and path, loosely typed, until the document has them.
 */
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { openApiDocument } from '../api/app.ts';
import { ROUTE_SCOPES } from '../api/scopes.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const GENERATED_FILES = { types: 'client/openapi.ts', operations: 'client/operations.ts' } as const;
/** Any origin: the generated files do not depend on where the API runs. */
const SERVER = 'http://localhost:8080';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface OperationEntry {
  method: Method;
  path: string;
  /** How the request body is sent. */
  body: 'json' | 'multipart' | 'none';
  /** Whether the operation documents the Idempotency-Key header. */
  idempotencyKey: boolean;
  /** false: declared by the API but not in its document yet (PLANNED). */
  documented: boolean;
}

/**
 * Operations of api/scopes.ts whose routes are not in the document yet, with the method and path
 * the API reference gives them. Each drops out of use as soon as the document has it.
 */
export const PLANNED: Record<string, Omit<OperationEntry, 'documented'>> = {
  prepareRealtime: { method: 'POST', path: '/api/v1/realtime/prepare', body: 'json', idempotencyKey: false },
  runTurn: { method: 'POST', path: '/api/v1/realtime/turn', body: 'json', idempotencyKey: true },
  planVideoCache: { method: 'POST', path: '/api/v1/realtime/video-cache/plan', body: 'json', idempotencyKey: false },
  mintLiveSession: { method: 'POST', path: '/api/v1/realtime/livekit/session', body: 'json', idempotencyKey: false },
  releaseLiveSession: {
    method: 'POST',
    path: '/api/v1/realtime/livekit/session/release',
    body: 'json',
    idempotencyKey: false,
  },
  getLiveCapacity: { method: 'GET', path: '/api/v1/realtime/livekit/capacity', body: 'none', idempotencyKey: false },
  createScene: { method: 'POST', path: '/api/v1/scenes', body: 'json', idempotencyKey: false },
  getScene: { method: 'GET', path: '/api/v1/scenes/{sceneId}', body: 'none', idempotencyKey: false },
  getConnectionHistory: {
    method: 'GET',
    path: '/api/v1/sessions/{sessionId}/connection-history',
    body: 'none',
    idempotencyKey: false,
  },
  listRecordings: { method: 'GET', path: '/api/v1/recordings', body: 'none', idempotencyKey: false },
  getRecording: { method: 'GET', path: '/api/v1/recordings/{recordingId}', body: 'none', idempotencyKey: false },
  getRecordingAccess: {
    method: 'GET',
    path: '/api/v1/recordings/{recordingId}/access',
    body: 'none',
    idempotencyKey: false,
  },
};

interface DocOperation {
  operationId?: string;
  parameters?: { in: string; name: string }[];
  requestBody?: { content: Record<string, unknown> };
}

/** The operation table: every documented operation, then the planned ones not documented yet. */
export function operationTable(doc: {
  paths?: Record<string, Record<string, unknown>>;
}): Record<string, OperationEntry> {
  const table: Record<string, OperationEntry> = {};
  for (const [p, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, raw] of Object.entries(item)) {
      const op = raw as DocOperation;
      if (!op.operationId) continue;
      const content = Object.keys(op.requestBody?.content ?? {});
      table[op.operationId] = {
        method: method.toUpperCase() as Method,
        path: p,
        body: content.includes('multipart/form-data') ? 'multipart' : content.length > 0 ? 'json' : 'none',
        idempotencyKey: (op.parameters ?? []).some(
          (x) => x.in === 'header' && x.name.toLowerCase() === 'idempotency-key',
        ),
        documented: true,
      };
    }
  }
  for (const id of Object.keys(ROUTE_SCOPES)) {
    const documented = table[id];
    const planned = PLANNED[id];
    if (documented) {
      if (planned && (planned.method !== documented.method || planned.path !== documented.path)) {
        throw new Error(
          `${id}: planned as ${planned.method} ${planned.path}, documented as ${documented.method} ${documented.path}: fix PLANNED`,
        );
      }
      continue;
    }
    if (!planned)
      throw new Error(
        `${id} is declared in api/scopes.ts but neither documented nor planned: add it to PLANNED in scripts/client-types.ts`,
      );
    table[id] = { ...planned, documented: false };
  }
  return Object.fromEntries(Object.entries(table).sort(([a], [b]) => a.localeCompare(b)));
}

const BANNER =
  "// Generated by `npm run client:types` (scripts/client-types.ts) from the API's OpenAPI document. Do not edit.\n";

/** The generated files' contents, from a document (the app's own by default). */
export async function generateClientFiles(doc: object = openApiDocument(SERVER)): Promise<Record<string, string>> {
  const types = `${COMMENT_HEADER}${BANNER}\n${astToString(await openapiTS(doc as never, { silent: true }))}`;
  const table = operationTable(doc as { paths?: Record<string, Record<string, unknown>> });
  const operations =
    `${BANNER}\n` +
    '/** Each operation of the API: method, path template, body kind, whether it takes an Idempotency-Key, and whether its types are generated (documented) or loose until they are. */\n' +
    `export const OPERATIONS = ${JSON.stringify(table, null, 2)} as const;\n\n` +
    'export type OperationId = keyof typeof OPERATIONS;\n';
  return { [GENERATED_FILES.types]: types, [GENERATED_FILES.operations]: operations };
}

/** Files whose committed contents differ from what the document generates now. */
export async function staleFiles(doc?: object): Promise<string[]> {
  const files = await generateClientFiles(doc);
  const stale: string[] = [];
  for (const [file, content] of Object.entries(files)) {
    const current = await readFile(path.join(ROOT, file), 'utf8').catch(() => undefined);
    if (current !== content) stale.push(file);
  }
  return stale;
}

async function main() {
  for (const [file, content] of Object.entries(await generateClientFiles())) {
    await writeFile(path.join(ROOT, file), content);
    console.log(`wrote ${file}`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
