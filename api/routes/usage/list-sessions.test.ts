import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../../test/helpers.ts';

const t = await testApi();
afterAll(() => t.close());
const URL = '/api/v1/usage/sessions';
const DAY = 86_400_000;

interface Page {
  data: { sessionId: string; status: string; billedCreditMicros: number; endUserId: string | null }[];
  from: string;
  to: string;
  nextCursor: string | null;
}

async function session(tenantId: string, apiKeyId: string, endUserId: string | null, seconds: number) {
  const s = await t.services.usage.open({
    tenantId,
    apiKeyId,
    kind: 'turn',
    endUserId,
    reserveCreditMicros: 10_000_000,
    ttlSeconds: 60,
  });
  await t.services.usage.start(s.sessionId);
  await t.services.usage.finish(s.sessionId, { status: 'released', billableMs: seconds * 1000 });
  return s.sessionId;
}

describe('GET /usage/sessions', () => {
  it('happy: lists settled sessions with their charge and echoes the default 30-day window', async () => {
    const { apiKey, tenantId, apiKeyId } = await t.newTenant({ credits: 100 });
    const id = await session(tenantId, apiKeyId, 'user-1', 3);
    const res = await t.request('GET', URL, { key: apiKey });
    expect(res.status).toBe(200);
    const page = await json<Page>(res);
    expect(page.data).toEqual([
      expect.objectContaining({ sessionId: id, status: 'released', billedCreditMicros: 3_000_000 }),
    ]);
    const span = Date.parse(page.to) - Date.parse(page.from);
    expect(span).toBe(30 * DAY);
    expect(page.nextCursor).toBeNull();
  });

  it('happy: a window wider than 90 days is narrowed, not refused', async () => {
    const { apiKey } = await t.newTenant();
    const to = new Date().toISOString();
    const from = new Date(Date.now() - 400 * DAY).toISOString();
    const page = await json<Page>(await t.request('GET', `${URL}?from=${from}&to=${to}`, { key: apiKey }));
    expect(Date.parse(page.to)).toBe(Date.parse(to));
    expect(Date.parse(page.to) - Date.parse(page.from)).toBe(90 * DAY);
  });

  it('happy: pages with nextCursor and narrows to one endUserId', async () => {
    const { apiKey, tenantId, apiKeyId } = await t.newTenant({ credits: 100 });
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await session(tenantId, apiKeyId, i % 2 ? 'odd' : 'even', 1));
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const qs: string = cursor ? `&cursor=${cursor}` : '';
      const page: Page = await json<Page>(await t.request('GET', `${URL}?limit=2${qs}`, { key: apiKey }));
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((d) => d.sessionId));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen.sort()).toEqual([...ids].sort());
    const odd = await json<Page>(await t.request('GET', `${URL}?endUserId=odd`, { key: apiKey }));
    expect(odd.data.map((d) => d.endUserId)).toEqual(['odd', 'odd']);
  });

  it('error: 422 naming the field for a bad timestamp, a bad cursor, from after to, or an unknown parameter', async () => {
    const { apiKey } = await t.newTenant();
    const cases: [string, string][] = [
      ['?from=yesterday', 'from'],
      ['?cursor=garbage', 'cursor'],
      [`?from=${new Date().toISOString()}&to=${new Date(Date.now() - DAY).toISOString()}`, 'from'],
      ['?EndUserId=x', 'EndUserId'],
      ['?limit=1000', 'limit'],
    ];
    for (const [qs, field] of cases) {
      const res = await t.request('GET', URL + qs, { key: apiKey });
      expect(res.status, qs).toBe(422);
      expect((await json(res)).field, qs).toBe(field);
    }
  });

  it('security: never shows another tenant’s sessions, and needs usage:read', async () => {
    const a = await t.newTenant({ credits: 10 });
    const b = await t.newTenant();
    await session(a.tenantId, a.apiKeyId, 'shared-user-id', 1);
    const page = await json<Page>(await t.request('GET', `${URL}?endUserId=shared-user-id`, { key: b.apiKey }));
    expect(page.data).toEqual([]);
    const noScope = await t.newTenant({ scopes: ['credits:read'] });
    expect((await t.request('GET', URL, { key: noScope.apiKey })).status).toBe(403);
  });
});
