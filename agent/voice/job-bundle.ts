/**
 * The voice job as one plain JavaScript file, for agents-js's job processes.
 *
 * agents-js keeps a spare process booted for the next call and forks it with the worker's own Node
 * flags. Under tsx each spare resolves and compiles every module through tsx's hooks: about 2.5 s of
 * CPU to import the job, against about 1 s for one precompiled file. That CPU is taken from the
 * calls in progress each time a call starts. So the worker bundles job.ts (our modules; packages stay
 * imports) with esbuild when it starts, and forks the spares without tsx.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type Plugin } from 'esbuild';

/** The repository's own packages folder: the bundle lives under it, so its package imports resolve as the sources' do. */
const CACHE_DIR = fileURLToPath(new URL('../../node_modules/.cache/avatar-platform/', import.meta.url));

/**
 * A module's `import.meta.url` becomes its own source file's URL: paths relative to a module (the
 * models, the migrations, the TTS worker) stay right in one bundled file elsewhere.
 */
const ownUrls: Plugin = {
  name: 'own-import-meta-url',
  setup(b) {
    b.onLoad({ filter: /\.ts$/ }, async (args) => {
      const source = (await readFile(args.path, 'utf8')).replaceAll(
        'import.meta.url',
        JSON.stringify(pathToFileURL(args.path).href),
      );
      if (source.includes('import.meta')) {
        return {
          errors: [{ text: 'import.meta other than import.meta.url cannot be bundled', location: { file: args.path } }],
        };
      }
      return { contents: source, loader: 'ts' };
    });
  },
};

/**
 * Bundles `entry` (a TypeScript module) into the cache and answers the bundle's path. The file is
 * named by its content: workers starting together write the same bytes, and an old worker's file is
 * never replaced under it.
 */
export async function bundleForProcesses(entry: string): Promise<string> {
  const out = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    write: false,
    logLevel: 'silent',
    plugins: [ownUrls],
  });
  const code = out.outputFiles[0]!.contents;
  const name = `${path.basename(entry, '.ts')}-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`;
  const file = path.join(CACHE_DIR, name);
  const exists = await stat(file).then(
    () => true,
    () => false,
  );
  if (!exists) {
    await mkdir(CACHE_DIR, { recursive: true });
    // A name of its own per writer (builds in one process as well as in several), then one atomic rename.
    const tmp = `${file}.${randomUUID()}.tmp`;
    await writeFile(tmp, code);
    await rename(tmp, file);
  }
  return file;
}

/** Node flags without tsx's (`--import tsx`, `--require …/tsx/…`, `--import=…tsx…`): what a process running plain JavaScript needs. */
export function withoutTsx(execArgv: readonly string[]): string[] {
  const isTsx = (v: string) => v === 'tsx' || /[\\/]tsx[\\/]/.test(v) || v.startsWith('tsx/');
  const out: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const a = execArgv[i]!;
    const joined = /^--(import|require|loader|experimental-loader)=(.*)$/.exec(a);
    if (joined && isTsx(joined[2]!)) continue;
    if (
      /^(--import|--require|-r|--loader|--experimental-loader)$/.test(a) &&
      i + 1 < execArgv.length &&
      isTsx(execArgv[i + 1]!)
    ) {
      i++;
      continue;
    }
    out.push(a);
  }
  return out;
}
