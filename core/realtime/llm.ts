/**
 * The LLM of talk turns: any OpenAI-compatible chat completions endpoint (OPENAI_BASE_URL,
 * OPENAI_API_KEY, LLM_MODEL), streamed. A turn waits for the first text of the answer before it
 * commits to its 200, so a failing or silent LLM is an error answer (502 upstream_unreachable, 504
 * upstream_timeout) with nothing billed; after that, a failure ends the stream with its ERROR record.
 */
import OpenAI from 'openai';
import type { Config } from '../platform/config.ts';
import { ApiError } from '../platform/errors.ts';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant';
  content: string;
}

/** Whether an LLM is configured: an OpenAI-compatible endpoint or an OpenAI key. */
export function llmConfigured(config: Pick<Config, 'OPENAI_BASE_URL' | 'OPENAI_API_KEY'>): boolean {
  return Boolean(config.OPENAI_BASE_URL || config.OPENAI_API_KEY);
}

class LlmTimeout extends Error {
  override name = 'LlmTimeout';
}

export class ChatModel {
  private readonly client: OpenAI;

  constructor(
    private readonly config: Pick<Config, 'OPENAI_BASE_URL' | 'OPENAI_API_KEY' | 'LLM_MODEL' | 'LLM_TIMEOUT_SECONDS'>,
  ) {
    this.client = new OpenAI({
      apiKey: config.OPENAI_API_KEY ?? 'unused',
      ...(config.OPENAI_BASE_URL ? { baseURL: config.OPENAI_BASE_URL } : {}),
      // A turn is waiting: no silent retries with back-off; the caller may retry (502 is retryable).
      maxRetries: 0,
    });
  }

  /**
   * Starts a streamed answer and waits for its first text. Resolves to the answer's text pieces
   * (the first one included; a `return()` on them cancels the request), or throws ApiError
   * (upstream_unreachable, upstream_timeout). `signal` cancels it from outside (the caller left).
   */
  async open(messages: ChatMessage[], signal?: AbortSignal): Promise<AsyncGenerator<string, void, undefined>> {
    const timeoutMs = this.config.LLM_TIMEOUT_SECONDS * 1000;
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    let timer: NodeJS.Timeout | undefined;
    /**
     * The next chunk, given up on when the LLM sends nothing for `timeoutMs` (counted only while
     * waiting for it: a turn that reads slowly is not the LLM's fault).
     */
    const next = async () => {
      timer = setTimeout(
        () => controller.abort(new LlmTimeout(`The LLM sent nothing for ${this.config.LLM_TIMEOUT_SECONDS} s`)),
        timeoutMs,
      );
      try {
        return await pieces.next();
      } finally {
        clearTimeout(timer);
      }
    };
    const stop = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      controller.abort();
    };
    const failure = (err: unknown): unknown => {
      const reason: unknown = controller.signal.reason;
      if (reason instanceof LlmTimeout) return new ApiError('upstream_timeout', `${reason.message}: retry the turn`);
      if (signal?.aborted) return err;
      if (err instanceof ApiError) return err;
      if (err instanceof OpenAI.APIError && typeof err.status === 'number') {
        return new ApiError(
          'upstream_unreachable',
          `The LLM refused the request (HTTP ${err.status}): ${err.message.slice(0, 300)}`,
        );
      }
      return new ApiError(
        'upstream_unreachable',
        `The LLM could not be reached or its answer broke off: ${err instanceof Error ? err.message.slice(0, 300) : String(err)}`,
      );
    };

    // The first next() sends the request, so the timeout covers connecting and the response head too.
    let pieces: AsyncIterator<OpenAI.Chat.Completions.ChatCompletionChunk> = {
      next: () =>
        this.client.chat.completions
          .create({ model: this.config.LLM_MODEL, messages, stream: true }, { signal: controller.signal })
          .then((stream) => {
            pieces = stream[Symbol.asyncIterator]();
            return pieces.next();
          }),
    };
    let first: string | undefined;
    try {
      for (;;) {
        const n = await next();
        if (n.done) break;
        const text = n.value.choices?.[0]?.delta?.content;
        if (text) {
          first = text;
          break;
        }
      }
    } catch (err) {
      stop();
      throw failure(err);
    }
    return (async function* rest(): AsyncGenerator<string, void, undefined> {
      try {
        if (first === undefined) return; // the LLM answered nothing
        yield first;
        for (;;) {
          let n: IteratorResult<OpenAI.Chat.Completions.ChatCompletionChunk>;
          try {
            n = await next();
          } catch (err) {
            throw failure(err);
          }
          if (n.done) return;
          const text = n.value.choices?.[0]?.delta?.content;
          if (text) yield text;
        }
      } finally {
        stop();
      }
    })();
  }
}
