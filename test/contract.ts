// OpenAPI 3.1 schemas are JSON Schema 2020-12: ajv's 2020 dialect checks them as written.
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

/**
 * The contract checker of the test helpers: every exchange a test makes through `testApi().request`
 * is checked against the app's own /openapi.json, the document the SDK is generated from.
 *
 * - The operation is looked up by method and path template. A path under /api/v1 with no such
 *   operation must answer the documented error body.
 * - The status must be one the operation documents, with the documented content type; a JSON body
 *   must validate against the schema documented for that status; a status documented without
 *   content must answer no body.
 * - A request the server accepted (2xx) must be one the document accepts: its JSON body, query
 *   parameters and path parameters validate against the documented schemas (enforcement never
 *   looser than the document).
 * - Multipart and binary bodies are checked for status and content type only.
 *
 * A mismatch throws, failing the test, with the operation, the exchange and every schema error.
 */

export interface Schema {
  [keyword: string]: unknown;
}

interface Parameter {
  name: string;
  in: 'query' | 'path' | 'header' | 'cookie';
  required?: boolean;
  schema: Schema;
}

interface Operation {
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { required?: boolean; content: Record<string, { schema?: Schema }> };
  responses: Record<string, { description: string; content?: Record<string, { schema?: Schema }> }>;
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
}

export interface Exchange {
  method: string;
  /** Path and query as requested. */
  url: string;
  requestHeaders: Record<string, string>;
  /** The request body when it was text (a JSON body, a raw string); undefined for none, bytes or a stream. */
  requestText?: string;
  /** Whether the request had a body of any kind. */
  hadBody: boolean;
  response: Response;
}

/** One checked exchange, for the test asserting that every operation was checked. */
export interface CheckedExchange {
  operationId: string;
  status: number;
  /** Whether the request itself was validated (a 2xx with a documented request). */
  requestChecked: boolean;
}

const DOC_ID = 'openapi.json';
const V1 = '/api/v1/';

function templateMatcher(template: string): RegExp {
  const names: string[] = [];
  const source = template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{([^}]+)\\?\}/g, (_m, name: string) => {
    names.push(name);
    return '([^/]+)';
  });
  return new RegExp(`^${source}$`);
}

function paramNames(template: string): string[] {
  return [...template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
}

/** A query or path value as the type its schema documents (they travel as text). */
function coerce(value: string, schema: Schema): unknown {
  const types = ([] as unknown[]).concat(schema.type ?? []);
  if ((types.includes('integer') || types.includes('number')) && value.trim() !== '' && !Number.isNaN(Number(value)))
    return Number(value);
  if (types.includes('boolean') && (value === 'true' || value === 'false')) return value === 'true';
  return value;
}

function clip(s: string, max = 600): string {
  return s.length > max ? `${s.slice(0, max)}... (${s.length} characters)` : s;
}

export class ContractChecker {
  // Not strict: OpenAPI adds keywords of its own (example, ...); formats are documentation here.
  private readonly ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly operations: { method: string; template: string; match: RegExp; op: Operation }[] = [];
  readonly checked: CheckedExchange[] = [];

  constructor(readonly doc: OpenApiDocument) {
    this.ajv.addSchema({ $id: DOC_ID, components: doc.components });
    for (const [template, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops))
        this.operations.push({ method: method.toUpperCase(), template, match: templateMatcher(template), op });
    }
  }

  /** A validator of `schema`, whose `#/components/...` references point into the document. */
  validator(schema: Schema): ValidateFunction {
    const text = JSON.stringify(schema).replaceAll('"#/components/', `"${DOC_ID}#/components/`);
    let v = this.validators.get(text);
    if (!v) {
      v = this.ajv.compile(JSON.parse(text) as object);
      this.validators.set(text, v);
    }
    return v;
  }

  /** Schema errors of `value`, one per line, or undefined when it validates. */
  errors(schema: Schema, value: unknown): string | undefined {
    const v = this.validator(schema);
    if (v(value)) return undefined;
    return (v.errors ?? [])
      .map(
        (e) =>
          `  ${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`,
      )
      .join('\n');
  }

  /** The documented operation of a request, if any. */
  find(method: string, path: string): { template: string; op: Operation; params: Record<string, string> } | undefined {
    for (const o of this.operations) {
      if (o.method !== method.toUpperCase()) continue;
      const m = o.match.exec(path);
      if (!m) continue;
      const names = paramNames(o.template);
      const params: Record<string, string> = {};
      names.forEach((n, i) => {
        try {
          params[n] = decodeURIComponent(m[i + 1]!);
        } catch {
          params[n] = m[i + 1]!;
        }
      });
      return { template: o.template, op: o.op, params };
    }
    return undefined;
  }

  /** Checks one exchange; throws on any mismatch. The response is read from a clone. */
  async check(x: Exchange): Promise<void> {
    const url = new URL(x.url, 'http://local');
    if (!url.pathname.startsWith(V1)) return;
    const res = x.response;
    const status = res.status;
    const contentType = res.headers.get('content-type') ?? '';
    const text = await res.clone().text();
    const found = this.find(x.method, url.pathname);
    const where = `${x.method} ${clip(x.url, 200)} answered ${status}`;
    const problems: string[] = [];

    if (!found) {
      // No such operation: the answer is a 404 or 405 with the documented error body.
      problems.push(
        ...this.checkJson(
          this.doc.components.schemas.Error ? { $ref: '#/components/schemas/Error' } : {},
          contentType,
          text,
          'undocumented operation',
        ),
      );
      if (problems.length) throw new Error(`Contract: ${where}\n${problems.join('\n')}`);
      return;
    }
    const { op, params, template } = found;
    const documented = op.responses[String(status)];
    if (!documented) {
      problems.push(
        `status ${status} is not documented for ${op.operationId} (documented: ${Object.keys(op.responses).join(', ')}); body: ${clip(text)}`,
      );
    } else if (!documented.content || Object.keys(documented.content).length === 0) {
      if (text.length > 0)
        problems.push(
          `status ${status} is documented without a body, but the answer has ${text.length} characters: ${clip(text)}`,
        );
    } else if (documented.content['application/json']) {
      problems.push(
        ...this.checkJson(documented.content['application/json'].schema ?? {}, contentType, text, `response ${status}`),
      );
    } else {
      const types = Object.keys(documented.content);
      if (!types.some((t) => contentType.toLowerCase().startsWith(t.replace(/\*.*$/, ''))))
        problems.push(`content type "${contentType}" is not documented (${types.join(', ')})`);
    }

    let requestChecked = false;
    if (status >= 200 && status < 300) {
      requestChecked = true;
      problems.push(...this.checkRequest(op, params, url, x));
    }
    if (problems.length)
      throw new Error(`Contract: ${where} (${op.operationId}, ${x.method} ${template})\n${problems.join('\n')}`);
    this.checked.push({ operationId: op.operationId, status, requestChecked });
  }

  private checkJson(schema: Schema, contentType: string, text: string, what: string): string[] {
    if (!/^application\/json\b/i.test(contentType))
      return [`${what}: content type is "${contentType}", documented application/json; body: ${clip(text)}`];
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return [`${what}: the body is not JSON: ${clip(text)}`];
    }
    const errors = this.errors(schema, body);
    return errors ? [`${what}: the body does not match the documented schema:\n${errors}\nbody: ${clip(text)}`] : [];
  }

  /** A request the server accepted must be one the document accepts. */
  private checkRequest(op: Operation, params: Record<string, string>, url: URL, x: Exchange): string[] {
    const problems: string[] = [];
    const parameters = op.parameters ?? [];
    for (const p of parameters.filter((q) => q.in === 'path')) {
      const errors = this.errors(p.schema, coerce(params[p.name] ?? '', p.schema));
      if (errors) problems.push(`path parameter ${p.name} was accepted but the document refuses it:\n${errors}`);
    }
    const query = parameters.filter((q) => q.in === 'query');
    for (const [name, value] of url.searchParams) {
      const p = query.find((q) => q.name === name);
      if (!p) {
        problems.push(`query parameter "${name}" was accepted but is not documented`);
        continue;
      }
      const errors = this.errors(p.schema, coerce(value, p.schema));
      if (errors)
        problems.push(
          `query parameter ${name}=${clip(value, 80)} was accepted but the document refuses it:\n${errors}`,
        );
    }
    for (const p of query)
      if (p.required && !url.searchParams.has(p.name))
        problems.push(`required query parameter "${p.name}" was missing, yet the request was accepted`);
    const headers = Object.fromEntries(Object.entries(x.requestHeaders).map(([k, v]) => [k.toLowerCase(), v]));
    for (const p of parameters.filter((q) => q.in === 'header')) {
      const value = headers[p.name.toLowerCase()];
      if (value === undefined) {
        if (p.required) problems.push(`required header "${p.name}" was missing, yet the request was accepted`);
        continue;
      }
      const errors = this.errors(p.schema, coerce(value, p.schema));
      if (errors) problems.push(`header ${p.name} was accepted but the document refuses it:\n${errors}`);
    }

    const body = op.requestBody;
    if (!body) {
      if (x.hadBody && x.requestText !== undefined && x.requestText.length > 0)
        problems.push('a request body was accepted, but the operation documents none');
      return problems;
    }
    if (!x.hadBody) {
      if (body.required)
        problems.push('the request had no body, yet it was accepted although the document requires one');
      return problems;
    }
    const contentType = (headers['content-type'] ?? '').toLowerCase();
    const json = body.content['application/json'];
    if (contentType.startsWith('application/json')) {
      if (!json)
        return [
          ...problems,
          `a JSON body was accepted, but the operation documents ${Object.keys(body.content).join(', ')}`,
        ];
      if (x.requestText === undefined) return problems;
      let value: unknown;
      try {
        value = JSON.parse(x.requestText);
      } catch {
        return [...problems, `a body that is not JSON was accepted: ${clip(x.requestText)}`];
      }
      const errors = this.errors(json.schema ?? {}, value);
      if (errors)
        problems.push(
          `the request body was accepted but the document refuses it:\n${errors}\nbody: ${clip(x.requestText)}`,
        );
    } else if (!Object.keys(body.content).some((t) => contentType.startsWith(t))) {
      problems.push(
        `a body of content type "${contentType}" was accepted, but the operation documents ${Object.keys(body.content).join(', ')}`,
      );
    }
    return problems;
  }
}

/** The checker of an app, from its own /openapi.json. */
export async function contractChecker(app: {
  request(url: string): Response | Promise<Response>;
}): Promise<ContractChecker> {
  const res = await app.request('/openapi.json');
  if (res.status !== 200) throw new Error(`GET /openapi.json answered ${res.status}`);
  return new ContractChecker((await res.json()) as OpenApiDocument);
}
