/**
 * Request and response types of every operation, derived from the generated `openapi.ts` (never
 * written by hand). An operation the API declares but whose route is not in the document yet is
 * typed loosely (objects of unknown fields) until `npm run client:types` regenerates the files.
 */
import type { components, operations } from './openapi.ts';
import type { OperationId } from './operations.ts';

export type { OperationId } from './operations.ts';
export type Schemas = components['schemas'];

/** What an operation missing from the document is typed as: any JSON object in, any JSON object out. */
export interface LooseOperation {
  parameters: {
    path?: Record<string, string>;
    query?: Record<string, string | number | boolean | undefined>;
    header?: Record<string, string>;
  };
  requestBody?: { content: { 'application/json': Record<string, unknown> } };
  responses: { 200: { content: { 'application/json': Record<string, unknown> } } };
}

/** The generated description of an operation (or the loose one). */
export type Operation<K extends OperationId> = K extends keyof operations ? operations[K] : LooseOperation;

type Params<K extends OperationId> = Operation<K>['parameters'];
type Defined<T> = [T] extends [never] ? never : Exclude<T, undefined>;

/** Path parameters (`{ avatarId }`), or never. */
export type PathParams<K extends OperationId> = Params<K> extends { path?: infer P } ? Defined<P> : never;
/** Query parameters, or never. */
export type QueryParams<K extends OperationId> = Params<K> extends { query?: infer Q } ? Defined<Q> : never;
/** The JSON request body, or the multipart form's fields, or never. */
export type RequestBody<K extends OperationId> =
  Operation<K> extends { requestBody?: { content: infer C } }
    ? C extends { 'application/json': infer B }
      ? B
      : C extends { 'multipart/form-data': infer F }
        ? F
        : never
    : never;

type SuccessStatus = 200 | 201 | 202 | 204;
type Responses<K extends OperationId> = Operation<K>['responses'];
/** The body of the operation's success answer (undefined for a 204). */
export type ResponseBody<K extends OperationId> = {
  [S in keyof Responses<K> & SuccessStatus]: Responses<K>[S] extends { content: { 'application/json': infer R } }
    ? R
    : undefined;
}[keyof Responses<K> & SuccessStatus];

// Names for the shapes users handle most (all generated).
export type Avatar = ResponseBody<'getAvatar'>;
export type Asset = ResponseBody<'createRemoteAsset'>;
export type CreditBalance = ResponseBody<'getCreditBalance'>;
export type Workspace = ResponseBody<'getWorkspace'>;
export type LipsyncRequest = RequestBody<'renderLipsync'>;
export type LipsyncResult = ResponseBody<'renderLipsync'>;
export type ErrorBody = Schemas['Error'];
