import dns from 'node:dns';
import type { LookupAddress } from 'node:dns';
import net from 'node:net';
import { Transform, type Readable } from 'node:stream';
import { Agent, buildConnector, errors as undiciErrors, request } from 'undici';
import { endpointKey, forbiddenReason } from './ip.ts';

/**
 * The one way this project fetches a URL a user gave it (remote assets now; lipsync audio and scene
 * sources later). Rules:
 *
 * - http and https only, no credentials in the URL, GET only;
 * - the host is resolved here and every address is checked (`forbiddenReason`): loopback, private,
 *   CGNAT, link-local (cloud metadata), unique-local, multicast, reserved, IPv4 inside IPv6 are
 *   refused. The check runs inside the connection's own lookup, so the address connected to is the
 *   address checked (no DNS-rebinding window); an IP-literal host is checked before connecting; and
 *   the connected socket's peer address is checked once more;
 * - redirects are followed by hand (at most 5), each hop checked the same way;
 * - connect, headers, idle-body and total timeouts;
 * - a size cap enforced while the body streams (a larger Content-Length is refused up front).
 */

export type SafeFetchFailure =
  'invalid_url' | 'forbidden_address' | 'unreachable' | 'timeout' | 'too_large' | 'too_many_redirects' | 'http_status';

export class SafeFetchError extends Error {
  override name = 'SafeFetchError';
  constructor(
    readonly reason: SafeFetchFailure,
    message: string,
    /** The upstream HTTP status, for `http_status`. */
    readonly status?: number,
  ) {
    super(message);
  }
}

export type Resolver = (hostname: string) => Promise<LookupAddress[]>;

const systemResolver: Resolver = (hostname) => dns.promises.lookup(hostname, { all: true, verbatim: true });

export interface SafeFetcherOptions {
  connectTimeoutMs?: number;
  /** Time to the response headers. */
  headersTimeoutMs?: number;
  /** Longest silence between body chunks. */
  bodyIdleTimeoutMs?: number;
  /** Whole exchange, redirects and body included. */
  totalTimeoutMs?: number;
  maxRedirects?: number;
  /** Name resolution; the system resolver (getaddrinfo) by default. Tests inject a fake one. */
  resolve?: Resolver;
  /**
   * TEST ONLY: exact "ip:port" endpoints ("[::1]:8080" for IPv6) exempt from the address rules, so
   * tests can serve content from loopback. Never fill this from configuration or the environment.
   */
  allowAddresses?: readonly string[];
}

export interface SafeFetchRequest {
  /** Abort (SafeFetchError "too_large") once the body passes this many bytes. */
  maxBytes: number;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

export interface SafeResponse {
  /** The final URL, after redirects. */
  url: string;
  status: number;
  contentType?: string;
  contentLength?: number;
  /** The body, capped at maxBytes while it streams; it fails with a SafeFetchError. */
  body: Readable;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Parses and checks a URL's form (scheme, credentials, literal address). */
export function checkUrl(raw: string | URL, allowed: ReadonlySet<string> = new Set()): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new SafeFetchError('invalid_url', 'Not a valid absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new SafeFetchError('invalid_url', `Scheme ${url.protocol} is not allowed: use http or https`);
  if (url.username || url.password) throw new SafeFetchError('invalid_url', 'Credentials in the URL are not allowed');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!host) throw new SafeFetchError('invalid_url', 'The URL has no host');
  if (net.isIP(host)) {
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    const why = allowed.has(endpointKey(host, port)) ? undefined : forbiddenReason(host);
    if (why) throw new SafeFetchError('forbidden_address', `The address ${host} is not allowed (${why})`);
  }
  return url;
}

function timeoutError(what: string): SafeFetchError {
  return new SafeFetchError('timeout', `The remote server timed out (${what})`);
}

function mapError(err: unknown): SafeFetchError {
  if (err instanceof SafeFetchError) return err;
  const cause = (err as { cause?: unknown })?.cause;
  if (cause instanceof SafeFetchError) return cause;
  if (err instanceof undiciErrors.ConnectTimeoutError) return timeoutError('connect');
  if (err instanceof undiciErrors.HeadersTimeoutError) return timeoutError('headers');
  if (err instanceof undiciErrors.BodyTimeoutError) return timeoutError('body');
  const code = (err as NodeJS.ErrnoException)?.code;
  const detail = code ?? (err instanceof Error ? err.message : String(err));
  return new SafeFetchError('unreachable', `The remote server could not be reached (${detail})`);
}

/** Drops a response body we will not read (an error listener first: destroying emits one). */
function discard(body: Readable): void {
  body.on('error', () => {});
  body.destroy();
}

export class SafeFetcher {
  private readonly opts: Required<Omit<SafeFetcherOptions, 'allowAddresses'>>;
  private readonly allowed: ReadonlySet<string>;
  private readonly agent: Agent;

  constructor(options: SafeFetcherOptions = {}) {
    this.opts = {
      connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
      headersTimeoutMs: options.headersTimeoutMs ?? 15_000,
      bodyIdleTimeoutMs: options.bodyIdleTimeoutMs ?? 30_000,
      totalTimeoutMs: options.totalTimeoutMs ?? 300_000,
      maxRedirects: options.maxRedirects ?? 5,
      resolve: options.resolve ?? systemResolver,
    };
    this.allowed = new Set((options.allowAddresses ?? []).map((e) => e.toLowerCase()));
    this.agent = new Agent({
      connect: (connectOpts, callback) => this.connect(connectOpts, callback),
      headersTimeout: this.opts.headersTimeoutMs,
      bodyTimeout: this.opts.bodyIdleTimeoutMs,
      connections: 16,
      keepAliveTimeout: 4_000,
    });
  }

  private isAllowed(address: string, port: number): boolean {
    return this.allowed.has(endpointKey(address, port));
  }

  private refusal(address: string, port: number): string | undefined {
    return this.isAllowed(address, port) ? undefined : forbiddenReason(address);
  }

  /** undici's connector with our lookup, and a last check of the connected peer. */
  private connect(connectOpts: buildConnector.Options, callback: buildConnector.Callback): void {
    const port = Number(connectOpts.port) || (connectOpts.protocol === 'https:' ? 443 : 80);
    const host = connectOpts.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host)) {
      // Node does not call `lookup` for IP literals: check before connecting.
      const why = this.refusal(host, port);
      if (why)
        return callback(new SafeFetchError('forbidden_address', `The address ${host} is not allowed (${why})`), null);
    }
    const lookup = (
      hostname: string,
      options: dns.LookupOptions,
      cb: (err: Error | null, address: string | LookupAddress[], family?: number) => void,
    ) => {
      this.opts
        .resolve(hostname)
        .then((all) => {
          const addresses = all.filter((a) => a.family === 4 || a.family === 6);
          if (addresses.length === 0) throw new SafeFetchError('unreachable', `${hostname} has no address`);
          // Every address must pass: connecting only to the ones checked leaves no rebinding window.
          for (const a of addresses) {
            const why = this.refusal(a.address, port);
            if (why)
              throw new SafeFetchError(
                'forbidden_address',
                `${hostname} resolves to ${a.address}, which is not allowed (${why})`,
              );
          }
          const wanted =
            options.family === 4 || options.family === 6
              ? addresses.filter((a) => a.family === options.family)
              : addresses;
          if (options.all) cb(null, wanted);
          else if (wanted[0]) cb(null, wanted[0].address, wanted[0].family);
          else cb(new SafeFetchError('unreachable', `${hostname} has no IPv${options.family} address`), '');
        })
        .catch((err: unknown) => {
          const e =
            err instanceof SafeFetchError
              ? err
              : new SafeFetchError(
                  'unreachable',
                  `${hostname} could not be resolved (${(err as NodeJS.ErrnoException)?.code ?? 'error'})`,
                );
          cb(e, '');
        });
    };
    const connector = buildConnector({ timeout: this.opts.connectTimeoutMs, lookup } as buildConnector.BuildOptions);
    connector(connectOpts, (err, socket) => {
      if (err || !socket) return callback(err ?? new Error('no socket'), null);
      const peer = socket.remoteAddress ?? '';
      const why = this.refusal(peer, port);
      if (why) {
        socket.destroy();
        return callback(
          new SafeFetchError('forbidden_address', `Connected to ${peer}, which is not allowed (${why})`),
          null,
        );
      }
      callback(null, socket);
    });
  }

  /**
   * Checks a URL before anything is fetched, so a refused one can be answered at once: its form
   * (checkUrl) and every address its host resolves to now. Throws SafeFetchError `invalid_url` or
   * `forbidden_address`; a host that does not resolve passes (the fetch reports it as unreachable).
   * The fetch checks again when it connects: this is for answering early, not the protection.
   */
  async checkTarget(rawUrl: string): Promise<URL> {
    const url = checkUrl(rawUrl, this.allowed);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (net.isIP(host)) return url;
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    let addresses: LookupAddress[];
    try {
      addresses = await this.opts.resolve(host);
    } catch {
      return url;
    }
    for (const a of addresses) {
      const why = this.refusal(a.address, port);
      if (why)
        throw new SafeFetchError(
          'forbidden_address',
          `${host} resolves to ${a.address}, which is not allowed (${why})`,
        );
    }
    return url;
  }

  /** GETs `rawUrl` under the rules above. Throws SafeFetchError; the body may fail with one later. */
  async fetch(rawUrl: string, req: SafeFetchRequest): Promise<SafeResponse> {
    const deadline = AbortSignal.timeout(this.opts.totalTimeoutMs);
    const signal = req.signal ? AbortSignal.any([req.signal, deadline]) : deadline;
    let url = checkUrl(rawUrl, this.allowed);
    for (let hop = 0; ; hop++) {
      let res;
      try {
        res = await request(url, {
          method: 'GET',
          dispatcher: this.agent,
          signal,
          headers: { 'user-agent': 'avatar-platform-fetch/1', accept: '*/*', ...req.headers },
        });
      } catch (err) {
        if (deadline.aborted) throw timeoutError('total');
        throw mapError(err);
      }
      const location = res.headers.location;
      if (REDIRECTS.has(res.statusCode) && typeof location === 'string') {
        discard(res.body);
        if (hop >= this.opts.maxRedirects)
          throw new SafeFetchError('too_many_redirects', `More than ${this.opts.maxRedirects} redirects`);
        let next: URL;
        try {
          next = new URL(location, url);
        } catch {
          throw new SafeFetchError('invalid_url', 'A redirect pointed to an invalid URL');
        }
        url = checkUrl(next, this.allowed);
        continue;
      }
      if (res.statusCode < 200 || res.statusCode > 299) {
        discard(res.body);
        throw new SafeFetchError('http_status', `The remote server answered HTTP ${res.statusCode}`, res.statusCode);
      }
      const lengthHeader = res.headers['content-length'];
      const contentLength =
        typeof lengthHeader === 'string' && /^\d+$/.test(lengthHeader) ? Number(lengthHeader) : undefined;
      if (contentLength !== undefined && contentLength > req.maxBytes) {
        discard(res.body);
        throw new SafeFetchError(
          'too_large',
          `The remote file is ${contentLength} bytes, over the cap of ${req.maxBytes}`,
        );
      }
      const contentType = typeof res.headers['content-type'] === 'string' ? res.headers['content-type'] : undefined;
      return {
        url: url.toString(),
        status: res.statusCode,
        contentType,
        contentLength,
        body: this.capped(res.body, req.maxBytes, deadline),
      };
    }
  }

  /** The body, failing with SafeFetchError past maxBytes, on the total deadline, or on upstream errors. */
  private capped(source: Readable, maxBytes: number, deadline: AbortSignal): Readable {
    let seen = 0;
    const out = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        seen += chunk.length;
        if (seen > maxBytes)
          return cb(new SafeFetchError('too_large', `The remote file exceeds the cap of ${maxBytes} bytes`));
        cb(null, chunk);
      },
    });
    const onDeadline = () => out.destroy(timeoutError('total'));
    deadline.addEventListener('abort', onDeadline, { once: true });
    source.on('error', (err) => out.destroy(mapError(err)));
    // Whatever ends the output (done, cap, deadline, the consumer giving up) ends the download too.
    out.on('close', () => {
      deadline.removeEventListener('abort', onDeadline);
      source.destroy();
    });
    source.pipe(out);
    return out;
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
