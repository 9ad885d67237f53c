import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../api/app.ts';
import { ROUTE_SCOPES } from '../api/scopes.ts';
import { OPERATIONS } from '../client/operations.ts';
import { testApi } from '../test/helpers.ts';
import { GENERATED_FILES, generateClientFiles, operationTable, PLANNED, staleFiles } from './client-types.ts';

/**
 * The client library's types and operation table are generated from the API's own document
 * (`npm run client:types`): this fails while the committed files differ from what the document the
 * app serves now generates.
 */
describe('generated client types', () => {
  it('are current with the /openapi.json the app serves', async () => {
    const t = await testApi();
    try {
      const res = await t.app.request('/openapi.json');
      const doc = (await res.json()) as object;
      expect(await staleFiles(doc), 'stale: run `npm run client:types`').toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('notice a change of the document: a new operation makes both files stale', async () => {
    const doc = openApiDocument('http://localhost:8080') as { paths: Record<string, unknown> };
    doc.paths['/api/v1/widgets'] = {
      get: {
        operationId: 'listWidgets',
        responses: { 200: { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } } },
      },
    };
    expect((await staleFiles(doc)).sort()).toEqual([GENERATED_FILES.operations, GENERATED_FILES.types].sort());
    expect((await generateClientFiles(doc))[GENERATED_FILES.types]).toContain('listWidgets');
  });

  it('cover every operation the API declares: documented, or planned with its method and path', () => {
    for (const id of Object.keys(ROUTE_SCOPES)) expect(OPERATIONS, id).toHaveProperty(id);
    for (const [id, op] of Object.entries(OPERATIONS)) {
      if (!op.documented) expect(PLANNED[id], id).toMatchObject({ method: op.method, path: op.path });
    }
  });

  it('refuse a planned operation whose documented method or path differs', () => {
    const doc = openApiDocument('http://localhost:8080') as unknown as {
      paths: Record<string, Record<string, unknown>>;
    };
    doc.paths['/api/v1/realtime/turns'] = { post: { operationId: 'runTurn', responses: {} } };
    expect(() => operationTable(doc)).toThrow(
      /runTurn: planned as POST \/api\/v1\/realtime\/turn, documented as POST \/api\/v1\/realtime\/turns/,
    );
  });
});
