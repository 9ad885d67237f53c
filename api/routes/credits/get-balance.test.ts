import { afterAll, describe, expect, it } from 'vitest';
import { json, testApi } from '../../../test/helpers.ts';

const t = await testApi();
afterAll(() => t.close());
const URL = '/api/v1/credits/balance';

describe('GET /credits/balance', () => {
  it('happy: returns the wallet with available = balance - reserved', async () => {
    const { apiKey, tenantId, apiKeyId } = await t.newTenant({ credits: 10 });
    await t.services.ledger.reserve({
      tenantId,
      apiKeyId,
      amountCreditMicros: 2_500_000,
      purpose: 'turn',
      ttlSeconds: 60,
    });
    const res = await t.request('GET', URL, { key: apiKey });
    expect(res.status).toBe(200);
    expect(await json(res)).toMatchObject({
      tenantId,
      balanceCreditMicros: 10_000_000,
      reservedCreditMicros: 2_500_000,
      availableCreditMicros: 7_500_000,
      lifetimeGrantedCreditMicros: 10_000_000,
      lifetimeUsedCreditMicros: 0,
      updatedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
  });

  it('error: 401 without a key', async () => {
    const res = await t.request('GET', URL);
    expect(res.status).toBe(401);
    expect(await json(res)).toMatchObject({ status: 401, code: 'unauthorized', retryable: false });
  });

  it('security: 403 for a key without credits:read, naming the scope', async () => {
    const { apiKey } = await t.newTenant({ scopes: ['avatars:read'] });
    const res = await t.request('GET', URL, { key: apiKey });
    expect(res.status).toBe(403);
    const body = await json(res);
    expect(body).toMatchObject({ code: 'forbidden', requiredScope: 'credits:read' });
    expect(body.error).toContain('credits:read');
  });

  it('security: each tenant reads only its own wallet', async () => {
    const a = await t.newTenant({ credits: 1 });
    const b = await t.newTenant({ credits: 2 });
    const [ra, rb] = await Promise.all([
      t.request('GET', URL, { key: a.apiKey }),
      t.request('GET', URL, { key: b.apiKey }),
    ]);
    expect((await json(ra)).tenantId).toBe(a.tenantId);
    expect((await json(rb)).balanceCreditMicros).toBe(2_000_000);
  });
});
