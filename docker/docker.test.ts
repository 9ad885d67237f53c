import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { AgentServer, ServerOptions, initializeLogger } from '@livekit/agents';
import { Ajv } from 'ajv';
import { validate as lintDockerfile } from 'dockerfile-utils';
import { describe, expect, inject, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { LIVEKIT_WEBHOOK_PATH } from '../api/routes/webhooks/livekit.ts';
import { CONFIG_VARIABLES } from '../core/platform/config.ts';
import { LIVEKIT_DEV_KEY, LIVEKIT_DEV_SECRET, freePort } from '../test/deps.ts';

/**
 * The images and the compose file, checked without a Docker engine (none runs in CI): the build
 * context as `.dockerignore` filters it; the Dockerfiles through a Dockerfile linter
 * (dockerfile-utils, every rule an error) and the project's own rules (non-root, health checks
 * that run, the right entry point per image); the compose file against the Compose specification's
 * JSON schema (test/fixtures/compose-spec) and against what the processes read; LiveKit's
 * configuration through the pinned LiveKit server itself. The same layout run as processes:
 * docker/layout.realtime.test.ts.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');
const DRAFT_07 = createRequire(import.meta.url)('ajv/dist/refs/json-schema-draft-07.json') as object;
const run = promisify(execFile);

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

const ignored = dockerignore(existsSync(path.join(ROOT, '.dockerignore')) ? read('.dockerignore') : '');

/** One build stage of a Dockerfile: its name (or index), its base, its instructions (continuations joined). */
interface Stage {
  name: string;
  base: string;
  instructions: string[];
}

/** The instructions of a Dockerfile, continuation lines joined, comments and the parser directive left out. */
function instructionsOf(text: string): string[] {
  return text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
}

function stagesOf(text: string): Stage[] {
  const stages: Stage[] = [];
  for (const ins of instructionsOf(text)) {
    const from = /^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?/i.exec(ins);
    if (from) stages.push({ name: from[2] ?? String(stages.length), base: from[1]!, instructions: [] });
    else stages.at(-1)?.instructions.push(ins);
  }
  return stages;
}

/** A stage's instructions with those of the stages it is built on first (`FROM runtime AS api`). */
function lineage(stages: Stage[], name: string): Stage[] {
  const stage = stages.find((s) => s.name === name);
  if (!stage) return [];
  return [...lineage(stages, stage.base), stage];
}

/** The exec-form arguments of an instruction (`CMD ["node", ...]`, `HEALTHCHECK ... CMD [...]`). */
function execForm(ins: string, after: RegExp): string[] {
  return JSON.parse(ins.replace(after, '')) as string[];
}

const DOCKERFILES = ['docker/Dockerfile', 'docker/Dockerfile.cuda'];
const IMAGES = [
  { target: 'api', entry: 'api/main.ts' },
  { target: 'agent', entry: 'agent/main.ts' },
] as const;

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
      // The compose file's secrets.
      'docker/.env',
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
      'agent/main.ts',
      'agent/voice/job.ts',
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
    // Everything the Dockerfiles copy from the context by name is in it.
    for (const file of DOCKERFILES) {
      for (const ins of instructionsOf(read(file)).filter((l) => /^COPY\s/i.test(l) && !/--from=/i.test(l))) {
        const sources = ins
          .split(/\s+/)
          .slice(1, -1)
          .filter((s) => !s.startsWith('--') && s !== '.');
        for (const s of sources) expect(ignored(s), `${file}: ${ins}: ${s}`).toBe(false);
      }
    }
  });
});

describe.each(DOCKERFILES)('%s', (file) => {
  const text = read(file);
  const stages = stagesOf(text);

  it('passes the Dockerfile linter with every rule an error', () => {
    const all = 2; // dockerfile-utils' ValidationSeverity.ERROR (a const enum the test cannot import)
    const problems = lintDockerfile(text, {
      deprecatedMaintainer: all,
      directiveCasing: all,
      emptyContinuationLine: all,
      instructionCasing: all,
      instructionCmdMultiple: all,
      instructionEntrypointMultiple: all,
      instructionHealthcheckMultiple: all,
      instructionJSONInSingleQuotes: all,
      instructionWorkdirRelative: all,
    });
    expect(problems.map((p) => `line ${p.range.start.line + 1}: ${p.message}`)).toEqual([]);
  });

  it('builds in stages, from tagged base images, the images taking only what they run from the build', () => {
    const args = Object.fromEntries(
      instructionsOf(text)
        .map((l) => /^ARG\s+(\w+)=(\S+)/i.exec(l))
        .filter((m): m is RegExpExecArray => !!m)
        .map((m) => [m[1]!, m[2]!]),
    );
    const names = new Set(stages.map((s) => s.name));
    for (const s of stages) {
      if (names.has(s.base)) continue;
      const image = s.base.replace(/^\$\{(\w+)\}$/, (_, a: string) => args[a] ?? '');
      expect(image, `the base of stage ${s.name}`).toMatch(/^[\w./-]+:[\w.-]+$/);
      expect(image).not.toMatch(/:latest$/);
    }
    for (const { target } of IMAGES) {
      const chain = lineage(stages, target);
      expect(chain.length, `stage ${target}`).toBeGreaterThan(0);
      // The image's stages install nothing with npm: the modules come built from an earlier stage.
      for (const s of chain)
        expect(s.instructions.filter((l) => /^RUN\s.*\bnpm\s+(ci|install)\b/i.test(l))).toEqual([]);
      expect(chain.flatMap((s) => s.instructions).some((l) => /^COPY\s+--from=\S+\s+\/app\s+\/app$/i.test(l))).toBe(
        true,
      );
    }
  });

  it.each(IMAGES)(
    'image $target: runs $entry as a non-root user owning the data directory, Node as PID 1',
    ({ target, entry }) => {
      const ins = lineage(stages, target).flatMap((s) => s.instructions);
      const userAt = ins.findLastIndex((l) => /^USER\s/i.test(l));
      const user = ins[userAt]?.split(/\s+/)[1];
      expect(user).toBeDefined();
      expect(user).not.toMatch(/^(root|0)(:|$)/);
      expect(/^ENV\s.*\bDATA_DIR=(\S+)/im.exec(ins.join('\n'))?.[1]).toBe('/data');
      // Created in a RUN before the switch to that user, and handed to it.
      const run = ins.slice(0, userAt).find((l) => /^RUN\s/i.test(l) && /\bmkdir\b[^&;]*\s\/data\b/.test(l));
      expect(run, 'a RUN that creates /data').toBeDefined();
      expect(run).toMatch(new RegExp(`\\bchown\\s+(-R\\s+)?${user!.split(':')[0]}(:\\S+)?\\s+/data\\b`));
      // The server itself is PID 1, so docker stop's SIGTERM reaches its ordered shutdown (the worker's drain).
      const cmd = execForm(
        ins.findLast((l) => /^CMD\s/i.test(l))!,
        /^CMD\s+/i,
      );
      expect(cmd.slice(0, 3)).toEqual(['node', '--import', 'tsx']);
      expect(cmd.at(-1)).toBe(entry);
      expect(ins.filter((l) => /^ENTRYPOINT\s/i.test(l))).toEqual([]);
    },
  );

  it.each(IMAGES)('image $target: has a health check in exec form, with Node (no curl in the image)', ({ target }) => {
    const healthchecks = lineage(stages, target)
      .flatMap((s) => s.instructions)
      .filter((l) => /^HEALTHCHECK\s/i.test(l));
    expect(healthchecks).toHaveLength(1);
    const argv = execForm(healthchecks[0]!, /^HEALTHCHECK\s+(--\S+\s+)*CMD\s+/i);
    expect(argv.slice(0, 2)).toEqual(['node', '-e']);
    expect(healthchecks[0]).toMatch(/--start-period=\d+s/);
  });
});

/** The health check command of an image of docker/Dockerfile, run here with `env`: its exit code. */
async function healthCheck(target: 'api' | 'agent', env: Record<string, string>): Promise<number> {
  const ins = lineage(stagesOf(read('docker/Dockerfile')), target).flatMap((s) => s.instructions);
  const argv = execForm(
    ins.find((l) => /^HEALTHCHECK\s/i.test(l))!,
    /^HEALTHCHECK\s+(--\S+\s+)*CMD\s+/i,
  );
  return run(process.execPath, argv.slice(1), { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 20_000 }).then(
    () => 0,
    (err: { code?: number }) => err.code ?? -1,
  );
}

describe("the images' health checks, run", () => {
  it('api: healthy while GET /readyz on PORT answers 2xx; unhealthy on 503 and when nothing listens', async () => {
    let status = 200;
    const seen: string[] = [];
    const server = http.createServer((req, res) => {
      seen.push(req.url ?? '');
      res.writeHead(req.url === '/readyz' ? status : 404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = String((server.address() as { port: number }).port);
    try {
      expect(await healthCheck('api', { PORT: port })).toBe(0);
      status = 503;
      expect(await healthCheck('api', { PORT: port })).toBe(1);
      expect(seen).toEqual(['/readyz', '/readyz']);
    } finally {
      await new Promise((r) => server.close(r));
    }
    expect(await healthCheck('api', { PORT: port })).toBe(1);
  });

  it("agent: healthy while agents-js's worker on AGENT_HEALTH_PORT is registered with LiveKit; unhealthy once it has stopped", async () => {
    initializeLogger({ pretty: false, level: 'fatal' });
    const port = await freePort();
    const worker = new AgentServer(
      new ServerOptions({
        agent: path.join(ROOT, 'test/fixtures/noop-agent.ts'),
        agentName: `health-${port}`,
        wsURL: inject('livekitUrl'),
        apiKey: LIVEKIT_DEV_KEY,
        apiSecret: LIVEKIT_DEV_SECRET,
        numIdleProcesses: 0,
        port,
        host: '127.0.0.1',
        logLevel: 'fatal',
      }),
    );
    const registered = new Promise<void>((resolve) => worker.event.once('worker_registered' as never, () => resolve()));
    const running = worker.run();
    await registered;
    expect(await healthCheck('agent', { AGENT_HEALTH_PORT: String(port) })).toBe(0);
    await worker.close();
    await running.catch(() => {});
    expect(await healthCheck('agent', { AGENT_HEALTH_PORT: String(port) })).toBe(1);
  });
});

// The compose files, read as `docker compose` reads them: `${VAR}`, `${VAR:-default}` and
// `${VAR:?error}` filled in from docker/.env (here .env.example, its secrets filled), `$$` a dollar.
const ENV_EXAMPLE = Object.fromEntries(
  read('docker/.env.example')
    .split('\n')
    .filter((l) => /^[A-Z0-9_]+=/.test(l))
    .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
);
const SECRETS = {
  POSTGRES_PASSWORD: 'pg-password-for-the-test',
  LIVEKIT_API_SECRET: 'a-livekit-secret-of-32-characters-or-more',
  MEDIA_SIGNING_SECRET: 'a-media-signing-secret',
};
const VARIABLE = /\$\{([A-Za-z0-9_]+)(?:(:?[-?])([^}]*))?\}/g;

function interpolate(text: string, env: Record<string, string>): string {
  return text
    .split('$$')
    .map((part) =>
      part.replace(VARIABLE, (_, name: string, op: string | undefined, arg: string) => {
        const value = env[name];
        const unset = op?.startsWith(':') ? !value : value === undefined;
        if (!unset) return value!;
        if (op?.endsWith('?')) throw new Error(`${name}: ${arg}`);
        return op?.endsWith('-') ? arg : '';
      }),
    )
    .join('$');
}

type Service = Record<string, unknown> & {
  image?: string;
  environment?: Record<string, string>;
  healthcheck?: { test: string[] };
  build?: { context: string; dockerfile: string; target: string };
  deploy?: { replicas?: number };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
  ports?: string[];
  stop_grace_period?: string;
};
const composeFile = (file: string, env: Record<string, string> = { ...ENV_EXAMPLE, ...SECRETS }) =>
  parseYaml(interpolate(read(file), env), { merge: true }) as { services: Record<string, Service> };
/** Compose durations as the compose file writes them (`30s`, `11m`, `1h`). */
const seconds = (d: string) => Number(/^(\d+)/.exec(d)![1]) * ({ s: 1, m: 60, h: 3600 }[d.slice(-1)] ?? Number.NaN);

describe('docker/compose.yaml', () => {
  const schema = JSON.parse(read('test/fixtures/compose-spec/compose-spec.json')) as object;
  // The schema names draft-07 by its https address; Ajv knows the draft by its http one.
  const ajv = new Ajv({ allErrors: true, strict: false });
  ajv.addMetaSchema({ ...DRAFT_07, $id: 'https://json-schema.org/draft-07/schema' });
  const validateCompose = ajv.compile(schema);
  const compose = composeFile('docker/compose.yaml');
  const { services } = compose;

  it.each(['docker/compose.yaml', 'docker/compose.gpu.yaml'])(
    "%s is valid under the Compose specification's schema",
    (file) => {
      const valid = validateCompose(composeFile(file));
      expect(validateCompose.errors ?? [], file).toEqual([]);
      expect(valid).toBe(true);
    },
  );

  it('the schema refuses what Compose would refuse (a misspelt key, a wrong type)', () => {
    const misspelt = structuredClone(compose) as { services: Record<string, Record<string, unknown>> };
    misspelt.services.api!.healthchek = { test: ['CMD', 'true'] };
    expect(validateCompose(misspelt)).toBe(false);
    const wrongType = structuredClone(compose) as { services: Record<string, Record<string, unknown>> };
    wrongType.services.agent!.deploy = { replicas: { n: 2 } };
    expect(validateCompose(wrongType)).toBe(false);
  });

  it('will not start without its secrets, and lists every variable it reads in docker/.env.example', () => {
    for (const name of Object.keys(SECRETS)) {
      const env: Record<string, string> = { ...ENV_EXAMPLE, ...SECRETS };
      delete env[name];
      expect(() => composeFile('docker/compose.yaml', env), name).toThrow(name);
    }
    const read_ = [...read('docker/compose.yaml').matchAll(VARIABLE)].map((m) => m[1]!);
    expect(read_.filter((v) => !(v in ENV_EXAMPLE))).toEqual([]);
  });

  it('brings up PostgreSQL, Redis, LiveKit, two API processes and two agent workers, each with a health check', () => {
    expect(Object.keys(services).sort()).toEqual(['agent', 'api', 'livekit', 'postgres', 'redis']);
    const dockerfile = stagesOf(read('docker/Dockerfile'));
    for (const [name, s] of Object.entries(services)) {
      if (s.build) {
        // Ours: the image's own HEALTHCHECK (checked and run above), its entry point the target's.
        expect(s.build.dockerfile, name).toBe('docker/Dockerfile');
        expect(s.build.context, name).toBe('..');
        expect(
          lineage(dockerfile, s.build.target).some((st) => st.instructions.some((l) => /^HEALTHCHECK\s/i.test(l))),
        ).toBe(true);
        expect(s.command, `${name} runs its image's CMD`).toBeUndefined();
      } else expect(s.healthcheck?.test[0], name).toBe('CMD');
    }
    expect(services.api!.build!.target).toBe('api');
    expect(services.agent!.build!.target).toBe('agent');
    expect(services.api!.deploy?.replicas).toBe(2);
    expect(services.agent!.deploy?.replicas).toBe(2);
    // One host port for each API process.
    const [range] = services.api!.ports!;
    const [, from, to] = /^(\d+)-(\d+):8080$/.exec(range!)!;
    expect(Number(to) - Number(from) + 1).toBe(services.api!.deploy!.replicas);
    // Nothing starts before what it needs is healthy.
    for (const [name, s] of Object.entries(services))
      for (const [dep, { condition }] of Object.entries(s.depends_on ?? {}))
        expect(condition, `${name} on ${dep}`).toBe('service_healthy');
    expect(Object.keys(services.agent!.depends_on!)).toEqual(expect.arrayContaining(['postgres', 'livekit']));
  });

  it('keeps the database and the media in volumes, shared by the API processes and the workers', () => {
    expect(services.postgres!.volumes).toContain('pgdata:/var/lib/postgresql/data');
    const dataDir = /\bDATA_DIR=(\S+)/.exec(read('docker/Dockerfile'))![1];
    for (const name of ['api', 'agent']) expect(services[name]!.volumes, name).toContain(`media:${dataDir}`);
  });

  it('gives the API processes and the workers the same configuration, every variable one the processes read', () => {
    const api = services.api!.environment!;
    const agent = services.agent!.environment!;
    for (const [k, v] of Object.entries(api)) expect(agent[k], k).toBe(v);
    const unknown = [...Object.keys(api), ...Object.keys(agent)].filter((k) => !CONFIG_VARIABLES.includes(k));
    expect(unknown).toEqual([]);
    expect(api.DATABASE_URL).toBe(`postgres://avatar:${SECRETS.POSTGRES_PASSWORD}@postgres:5432/avatar`);
    expect(api.REDIS_URL).toBe('redis://redis:6379');
    expect(api.LIVEKIT_URL).toBe('ws://livekit:7880');
    expect(api.LIVEKIT_API_SECRET).toBe(SECRETS.LIVEKIT_API_SECRET);
    expect(api.MEDIA_SIGNING_SECRET).toBe(SECRETS.MEDIA_SIGNING_SECRET);
    // The worker's stop lets its calls drain: the grace period outlasts AGENT_DRAIN_SECONDS.
    expect(seconds(services.agent!.stop_grace_period!)).toBeGreaterThan(Number(agent.AGENT_DRAIN_SECONDS));
  });

  describe('LiveKit', () => {
    const livekit = services.livekit!;
    const env = livekit.environment!;
    const config = parseYaml(env.LIVEKIT_CONFIG!) as { port: number; webhook: { api_key: string; urls: string[] } };

    it("runs LiveKit's official image at the version the tests run (package.json config.livekitServerVersion)", () => {
      const pkg = JSON.parse(read('package.json')) as { config: { livekitServerVersion: string } };
      expect(livekit.image).toBe(`livekit/livekit-server:${pkg.config.livekitServerVersion}`);
    });

    it('sends its webhooks to the API processes, signed with the key the API checks them with', () => {
      const api = services.api!.environment!;
      expect(config.webhook.urls).toEqual([`http://api:8080${LIVEKIT_WEBHOOK_PATH}`]);
      expect(config.webhook.api_key).toBe(api.LIVEKIT_API_KEY);
      expect(env.LIVEKIT_KEYS).toBe(`${api.LIVEKIT_API_KEY}: ${api.LIVEKIT_API_SECRET}`);
      expect(api.LIVEKIT_URL).toBe(`ws://livekit:${config.port}`);
    });

    it('has a configuration the pinned LiveKit server accepts, on the ports the compose file publishes', async () => {
      const cache = process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? '', '.cache');
      const version = (JSON.parse(read('package.json')) as { config: { livekitServerVersion: string } }).config
        .livekitServerVersion;
      const bin =
        process.env.LIVEKIT_SERVER_BIN ?? path.join(cache, 'avatar-platform', 'livekit-server', version, 'server');
      // `ports` reads the configuration as the server does (unknown keys refused) and prints the ports.
      const { stdout, stderr } = await run(bin, ['--config-body', env.LIVEKIT_CONFIG!, 'ports'], {
        env: { PATH: process.env.PATH ?? '', LIVEKIT_KEYS: env.LIVEKIT_KEYS! },
      });
      expect(stdout + stderr).not.toMatch(/could not parse|error/i);
      expect(stdout).toContain('7880 - HTTP service');
      expect(stdout).toContain('7881 - ICE/TCP');
      expect(stdout).toMatch(/7882\) - ICE\/UDP/);
      expect(livekit.ports).toEqual(['7880:7880', '7881:7881', '7882:7882/udp']);
    });
  });
});

describe('docker/compose.gpu.yaml', () => {
  it('builds the worker on the CUDA Dockerfile and renders on CUDA, one GPU per worker', () => {
    const agent = composeFile('docker/compose.gpu.yaml').services.agent!;
    expect(agent.build).toEqual({ context: '..', dockerfile: 'docker/Dockerfile.cuda', target: 'agent' });
    expect(agent.environment?.RENDER_DEVICE).toBe('cuda');
    expect(JSON.stringify(agent.deploy)).toContain('"capabilities":["gpu"]');
    expect(read('docker/Dockerfile.cuda')).toMatch(/^ARG ONNXRUNTIME_NODE_INSTALL=cuda12$/m);
  });
});
