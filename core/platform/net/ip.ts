import net from 'node:net';

/**
 * Which addresses a user-supplied URL may reach: public unicast only. Everything a server could
 * reach that the user could not (loopback, private and shared networks, link-local including the
 * cloud metadata address 169.254.169.254, unique-local, multicast, reserved and documentation
 * ranges, IPv4 embedded in IPv6) is refused.
 */

const V4_BLOCKS: [string, number, string][] = [
  ['0.0.0.0', 8, 'unspecified ("this network")'],
  ['10.0.0.0', 8, 'private (RFC 1918)'],
  ['100.64.0.0', 10, 'shared address space (CGNAT, RFC 6598)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (includes cloud metadata)'],
  ['172.16.0.0', 12, 'private (RFC 1918)'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation (TEST-NET-1)'],
  ['192.88.99.0', 24, '6to4 relay anycast'],
  ['192.168.0.0', 16, 'private (RFC 1918)'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation (TEST-NET-2)'],
  ['203.0.113.0', 24, 'documentation (TEST-NET-3)'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved (includes broadcast)'],
];

/** IPv6 ranges refused outright (those embedding IPv4 are handled apart). */
const V6_BLOCKS: [string, number, string][] = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['::', 96, 'IPv4-compatible (deprecated)'],
  ['64:ff9b:1::', 48, 'local-use NAT64'],
  ['100::', 64, 'discard-only'],
  ['2001::', 23, 'IETF protocol assignments (includes Teredo)'],
  ['2001:db8::', 32, 'documentation'],
  ['2002::', 16, '6to4'],
  ['3fff::', 20, 'documentation'],
  ['5f00::', 16, 'segment routing'],
  ['fc00::', 7, 'unique-local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local (deprecated)'],
  ['ff00::', 8, 'multicast'],
];

function v4ToInt(ip: string): number {
  return ip.split('.').reduce((acc, part) => acc * 256 + Number(part), 0);
}

/** 128-bit value of an IPv6 address (zone id dropped, embedded dotted IPv4 allowed). */
function v6ToBigInt(ip: string): bigint {
  let s = ip.toLowerCase().replace(/%.*$/, '');
  const dotted = /^(.*:)(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (dotted) {
    const v = v4ToInt(dotted[2]!);
    s = `${dotted[1]}${(v >>> 16).toString(16)}:${(v & 0xffff).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g || '0', 16)), 0n);
}

const V6_PARSED = V6_BLOCKS.map(([addr, prefix, why]) => ({ net: v6ToBigInt(addr), prefix, why }));
const V4_PARSED = V4_BLOCKS.map(([addr, prefix, why]) => ({ net: v4ToInt(addr), prefix, why }));

function inV4(value: number, netAddr: number, prefix: number): boolean {
  const shift = 32 - prefix;
  return Math.floor(value / 2 ** shift) === Math.floor(netAddr / 2 ** shift);
}

function inV6(value: bigint, netAddr: bigint, prefix: number): boolean {
  const shift = BigInt(128 - prefix);
  return value >> shift === netAddr >> shift;
}

function v4FromLow32(value: bigint): string {
  const n = Number(value & 0xffffffffn);
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

/**
 * Why `ip` must not be reached, or undefined for a public unicast address. Anything that is not an
 * IP address at all is refused too.
 */
export function forbiddenReason(ip: string): string | undefined {
  const family = net.isIP(ip.replace(/%.*$/, ''));
  if (family === 4) {
    const v = v4ToInt(ip);
    return V4_PARSED.find((b) => inV4(v, b.net, b.prefix))?.why;
  }
  if (family === 6) {
    const v = v6ToBigInt(ip);
    // IPv4-mapped (::ffff:0:0/96) and the well-known NAT64 prefix (64:ff9b::/96): judge the IPv4 inside.
    if (inV6(v, 0xffff00000000n, 96) || inV6(v, v6ToBigInt('64:ff9b::'), 96)) {
      const inner = forbiddenReason(v4FromLow32(v));
      return inner ? `IPv4 inside IPv6: ${inner}` : undefined;
    }
    const hit = V6_PARSED.find((b) => inV6(v, b.net, b.prefix))?.why;
    if (hit) return hit;
    // Global unicast is 2000::/3; everything else is reserved.
    return inV6(v, v6ToBigInt('2000::'), 3) ? undefined : 'reserved';
  }
  return 'not an IP address';
}

/** "ip:port" with IPv6 in brackets, lowercased: the form of allowlist entries. */
export function endpointKey(ip: string, port: number): string {
  const bare = ip.replace(/^\[|\]$/g, '').toLowerCase();
  return net.isIP(bare) === 6 ? `[${bare}]:${port}` : `${bare}:${port}`;
}

/**
 * The client a peer address stands for, as throttles count it: an IPv4 address as is (also when
 * IPv4-mapped in IPv6), an IPv6 address by its /64, since one subscriber is routinely handed a
 * whole /64 and could otherwise take a fresh address for every request.
 */
export function clientBucket(ip: string): string {
  const bare = ip.replace(/%.*$/, '');
  if (net.isIP(bare) !== 6) return bare;
  const v = v6ToBigInt(bare);
  if (inV6(v, 0xffff00000000n, 96)) return v4FromLow32(v);
  return `${(v >> 64n).toString(16).padStart(16, '0')}::/64`;
}
