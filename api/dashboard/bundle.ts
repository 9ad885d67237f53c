import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/** The dashboard's browser code (React, typed: dashboard/tsconfig.json), bundled by the API process itself. */
const ENTRY = fileURLToPath(new URL('../../dashboard/main.tsx', import.meta.url));
const EMBED_DIR = fileURLToPath(new URL('../../client/', import.meta.url));

interface DashboardAsset {
  contentType: string;
  body: Uint8Array;
}

export interface DashboardBundle {
  /** `/platform/assets/<name>` → the file; names carry their content's hash, so they are cached for good. */
  assets: Map<string, DashboardAsset>;
  script: string;
  stylesheet: string | undefined;
}

const CONTENT_TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

/**
 * Bundles the dashboard with esbuild into memory (about a second on one core: nothing is written,
 * so a read-only install works and `npm ci && npm start` needs no build step). Split: what only one
 * page needs (the playground's call, livekit-client) is a chunk of its own that the page loads when
 * it opens, so the other pages load without it. Each file is named by esbuild with the hash of its
 * content (the chunks import each other by those names): a new version gets a new URL, and the
 * old one can be cached forever.
 */
async function bundle(): Promise<DashboardBundle> {
  const result = await build({
    entryPoints: [ENTRY],
    bundle: true,
    write: false,
    format: 'esm',
    target: 'es2022',
    platform: 'browser',
    minify: true,
    jsx: 'automatic',
    outdir: 'out',
    splitting: true,
    entryNames: '[name]-[hash]',
    chunkNames: 'chunk-[hash]',
    metafile: true,
    logLevel: 'silent',
    // React's production build; no source maps (nothing of the server's layout is published).
    define: { 'process.env.NODE_ENV': '"production"' },
    absWorkingDir: path.dirname(ENTRY),
  });
  const assets = new Map<string, DashboardAsset>();
  let script = '';
  let stylesheet: string | undefined;
  for (const file of result.outputFiles) {
    const name = path.basename(file.path);
    assets.set(name, {
      contentType: CONTENT_TYPES[path.extname(name)] ?? 'application/octet-stream',
      body: file.contents,
    });
  }
  // The shell loads the entry's script and stylesheet; the chunks come with the imports.
  for (const [out, o] of Object.entries(result.metafile.outputs)) {
    if (o.entryPoint !== path.basename(ENTRY)) continue;
    script = path.basename(out);
    if (o.cssBundle) stylesheet = path.basename(o.cssBundle);
  }
  return { assets, script, stylesheet };
}

/**
 * `/platform/embed.js`: `<avatar-call>` (client/embed.ts, livekit-client included) as one classic
 * script for any page to load with a `<script src>`, defining the element as it runs.
 */
async function bundleEmbed(): Promise<Uint8Array> {
  const result = await build({
    stdin: {
      contents: "import { defineAvatarCall } from './embed.ts';\ndefineAvatarCall();\n",
      resolveDir: EMBED_DIR,
      loader: 'ts',
      sourcefile: 'embed-entry.ts',
    },
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2022',
    platform: 'browser',
    minify: true,
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.contents;
}

let embed: Promise<Uint8Array> | undefined;

/** The embed script, made on first use (a failed build is retried on the next call). */
export function embedBundle(): Promise<Uint8Array> {
  embed ??= bundleEmbed().catch((err: unknown) => {
    embed = undefined;
    throw err;
  });
  return embed;
}

let built: Promise<DashboardBundle> | undefined;

/** The bundle, made once per process (the first caller waits for it; a failed build is retried on the next call). */
export function dashboardBundle(): Promise<DashboardBundle> {
  built ??= bundle().catch((err: unknown) => {
    built = undefined;
    throw err;
  });
  return built;
}
