import { createHash, createHmac } from 'node:crypto';

/** RFC 3986 encoding as SigV4 wants it (everything but unreserved characters), optionally keeping "/". */
function awsUriEncode(s: string, keepSlash = false): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const ch = String.fromCharCode(byte);
    if (/[A-Za-z0-9\-_.~]/.test(ch) || (keepSlash && ch === '/')) out += ch;
    else out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();

export interface PresignInput {
  protocol: 'http:' | 'https:';
  /** Host header value, with the port when it is not the scheme's default. */
  host: string;
  /** Decoded path, e.g. "/bucket/dir/file.mp4"; encoded here. */
  path: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiresSeconds: number;
  now?: Date;
}

/**
 * A presigned GET URL (AWS Signature Version 4, query-string authentication, unsigned payload),
 * as `@aws-sdk/s3-request-presigner` would produce; written out here so that no undeclared
 * package is needed. Checked against the worked example of the S3 documentation.
 */
export function presignGetUrl(p: PresignInput): string {
  const now = p.now ?? new Date();
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const day = amzDate.slice(0, 8);
  const scope = `${day}/${p.region}/s3/aws4_request`;
  const query: Record<string, string> = {
    'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
    'X-Amz-Credential': `${p.accessKeyId}/${scope}`,
    'X-Amz-Date': amzDate,
    'X-Amz-Expires': String(p.expiresSeconds),
    'X-Amz-SignedHeaders': 'host',
  };
  if (p.sessionToken) query['X-Amz-Security-Token'] = p.sessionToken;
  const canonicalQuery = Object.keys(query)
    .sort()
    .map((k) => `${awsUriEncode(k)}=${awsUriEncode(query[k]!)}`)
    .join('&');
  const canonicalUri = awsUriEncode(p.path, true);
  const canonicalRequest = ['GET', canonicalUri, canonicalQuery, `host:${p.host}`, '', 'host', 'UNSIGNED-PAYLOAD'].join(
    '\n',
  );
  const stringToSign = [
    'AWS4-HMAC-SHA256',
    amzDate,
    scope,
    createHash('sha256').update(canonicalRequest).digest('hex'),
  ].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${p.secretAccessKey}`, day), p.region), 's3'), 'aws4_request');
  const signature = createHmac('sha256', signingKey).update(stringToSign).digest('hex');
  return `${p.protocol}//${p.host}${canonicalUri}?${canonicalQuery}&X-Amz-Signature=${signature}`;
}
