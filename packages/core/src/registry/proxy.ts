// Which proxy a registry request goes through, by the rules containerd's Go client applies to
// HTTP_PROXY, HTTPS_PROXY and NO_PROXY (Go's net/http ProxyFromEnvironment), so that a node behind
// a proxy configures fastpull and containerd alike:
// - the upper-case variable wins over the lower-case one when both are set and non-empty;
// - an HTTPS request uses HTTPS_PROXY, an HTTP request HTTP_PROXY; neither falls back to the other;
// - a proxy given as `host:port` is `http://host:port`;
// - `localhost` and loopback addresses (127.0.0.0/8, ::1) are never proxied, whatever NO_PROXY says;
// - NO_PROXY is a comma-separated list, case-insensitive: `*` (nothing is proxied), an IP address
//   (`10.1.2.3`, `[::1]`), a CIDR block (`10.0.0.0/8`), a domain (`example.com` matches it and its
//   subdomains; `.example.com` and `*.example.com` only its subdomains); an IP or a domain may carry a
//   port (`example.com:5000`), which the request's port (80 or 443 when it has none) must equal.
//   Domains match names only, never an address; entries that cannot be read are ignored.
import { BlockList, isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import { FastpullError } from '../errors.js';

/** Proxy settings as HTTP_PROXY, HTTPS_PROXY and NO_PROXY give them (empty or unset: none). */
export interface ProxySettings {
  /** The proxy of plain HTTP requests: `http://[user:password@]host[:port]` or `host:port`. */
  readonly httpProxy?: string;
  /** The proxy of HTTPS requests (through a CONNECT tunnel). */
  readonly httpsProxy?: string;
  /** Hosts reached directly; see the rules above. */
  readonly noProxy?: string;
  /**
   * Proxy loopback hosts too. Never read from the environment (a product never proxies loopback,
   * as containerd): it lets a test send its loopback registry's traffic through a loopback proxy.
   */
  readonly proxyLoopback?: boolean;
}

/** A proxy a request goes through. */
export interface Proxy {
  /** The proxy's host name or address (no brackets). */
  readonly hostname: string;
  /** Its port (80 when the URL gives none). */
  readonly port: number;
  /** `http://host:port`, without credentials: the only form messages and logs show. */
  readonly name: string;
  /** `Basic ...` from the credentials in the proxy's URL, sent as Proxy-Authorization; never shown. */
  readonly authorization: string | undefined;
}

/**
 * The settings of HTTP_PROXY, HTTPS_PROXY and NO_PROXY (or their lower-case forms, where the
 * upper-case one is unset or empty) in `env`. Read once, where a binary starts.
 * @example proxyEnvironment({ https_proxy: 'proxy:3128', NO_PROXY: '10.0.0.0/8' }) // { httpsProxy: 'proxy:3128', noProxy: '10.0.0.0/8' }
 */
export function proxyEnvironment(env: NodeJS.ProcessEnv): ProxySettings {
  const any = (upper: string): string | undefined => env[upper] || env[upper.toLowerCase()] || undefined;
  const [httpProxy, httpsProxy, noProxy] = [any('HTTP_PROXY'), any('HTTPS_PROXY'), any('NO_PROXY')];
  return { ...(httpProxy ? { httpProxy } : {}), ...(httpsProxy ? { httpsProxy } : {}), ...(noProxy ? { noProxy } : {}) };
}

/** One NO_PROXY entry that is an address or a name, with the port it asks for ('' for any). */
interface HostEntry {
  readonly host: string;
  readonly port: string;
  /** A domain written without a leading dot or `*.`: matches itself as well as its subdomains. */
  readonly self: boolean;
}

/** A proxy setting as read: the proxy, or why it cannot be used (said when a request would use it). */
type Setting = Proxy | { readonly unusable: string } | undefined;

/** The proxy rules of one set of settings, read once; {@link forUrl} answers each request. */
export class ProxyRules {
  private readonly http: Setting;
  private readonly https: Setting;
  private readonly all: boolean = false;
  private readonly blocks = new BlockList();
  private readonly addresses: HostEntry[] = [];
  private readonly domains: HostEntry[] = [];
  private readonly loopback: boolean;

  constructor(settings: ProxySettings) {
    this.http = parseProxy(settings.httpProxy, 'HTTP_PROXY');
    this.https = parseProxy(settings.httpsProxy, 'HTTPS_PROXY');
    this.loopback = settings.proxyLoopback === true;
    for (const raw of (settings.noProxy ?? '').split(',')) {
      const p = raw.trim().toLowerCase();
      if (p === '') continue;
      if (p === '*') {
        this.all = true;
        break;
      }
      if (this.addCidr(p)) continue;
      this.addHost(p);
    }
  }

  /** Whether any request can be proxied at all. */
  get active(): boolean {
    return (this.http !== undefined || this.https !== undefined) && !this.all;
  }

  /**
   * The proxy a request to `url` goes through, or undefined to go direct. Throws INVALID_ARGUMENT
   * when the proxy that applies cannot be used (a scheme other than http, no host).
   */
  forUrl(url: URL): Proxy | undefined {
    const setting = url.protocol === 'https:' ? this.https : url.protocol === 'http:' ? this.http : undefined;
    if (setting === undefined || !this.useProxy(url)) return undefined;
    if ('unusable' in setting) throw new FastpullError('INVALID_ARGUMENT', setting.unusable);
    return setting;
  }

  private useProxy(url: URL): boolean {
    if (this.all) return false;
    const host = unbracket(url.hostname).toLowerCase();
    const port = url.port || (url.protocol === 'https:' ? '443' : '80');
    const family = isIP(host);
    if (!this.loopback && (host === 'localhost' || (family !== 0 && isLoopback(host, family)))) return false;
    if (family !== 0) {
      const address = canonicalAddress(host, family);
      if (this.blocks.check(address.host, address.family === 4 ? 'ipv4' : 'ipv6')) return false;
      return !this.addresses.some((e) => e.host === address.host && (e.port === '' || e.port === port));
    }
    return !this.domains.some((e) => (host.endsWith(e.host) || (e.self && host === e.host.slice(1))) && (e.port === '' || e.port === port));
  }

  private addCidr(p: string): boolean {
    const slash = p.indexOf('/');
    if (slash < 0) return false;
    const [net, bits] = [p.slice(0, slash), p.slice(slash + 1)];
    const family = isIP(net);
    const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (family === 0 || !(prefix <= (family === 4 ? 32 : 128))) return false;
    const address = canonicalAddress(net, family);
    // A v4-mapped network is written as an IPv6 one: its prefix counts the 96 bits before the v4 part.
    const length = address.family === family ? prefix : prefix - 96;
    if (length < 0) return false;
    this.blocks.addSubnet(address.host, length, address.family === 4 ? 'ipv4' : 'ipv6');
    return true;
  }

  private addHost(p: string): void {
    const [named, port] = splitHostPort(p) ?? [p, ''];
    let host = named;
    if (host === '') return;
    if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
    const family = isIP(host);
    if (family !== 0) {
      this.addresses.push({ host: canonicalAddress(host, family).host, port, self: true });
      return;
    }
    if (host.startsWith('*.')) host = host.slice(1);
    const self = !host.startsWith('.');
    if (self) host = `.${host}`;
    host = domainToASCII(host.slice(1)) ? `.${domainToASCII(host.slice(1))}` : host;
    this.domains.push({ host, port, self });
  }
}

/** A proxy URL as Go reads it: a URL, or `host[:port]` taken as `http://host[:port]`. */
function parseProxy(value: string | undefined, what: string): Setting {
  if (!value) return undefined;
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url === undefined || url.host === '') {
    try {
      url = new URL(`http://${value}`);
    } catch {
      return { unusable: `${what}: not a proxy URL (want http://host:port)` };
    }
  }
  // The value may hold a password: messages name the proxy by scheme, host and port only.
  const name = `${url.protocol}//${url.host}`;
  if (url.protocol !== 'http:') return { unusable: `${what} ${name}: fastpull speaks to HTTP proxies only (http://host:port)` };
  if (url.hostname === '') return { unusable: `${what}: the proxy URL names no host` };
  const user = url.username || url.password ? `${decode(url.username)}:${decode(url.password)}` : undefined;
  return {
    hostname: unbracket(url.hostname),
    port: Number(url.port || 80),
    name,
    authorization: user === undefined ? undefined : `Basic ${Buffer.from(user, 'utf8').toString('base64')}`,
  };
}

function decode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

/** `host:port` or `[v6]:port` split as Go's net.SplitHostPort does; undefined when it is neither. */
function splitHostPort(p: string): [string, string] | undefined {
  const m = /^\[([^\]]*)\]:(\d*)$/.exec(p) ?? /^([^:[\]]*):(\d*)$/.exec(p);
  return m ? [m[1]!, m[2]!] : undefined;
}

/** An address in the form entries are compared in: an IPv4-mapped IPv6 address as its IPv4 address. */
function canonicalAddress(host: string, family: number): { host: string; family: 4 | 6 } {
  if (family === 4) return { host, family: 4 };
  const v6 = canonicalV6(host);
  const dotted = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(v6);
  if (dotted) return { host: dotted[1]!, family: 4 };
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (hex) {
    const [hi, lo] = [parseInt(hex[1]!, 16), parseInt(hex[2]!, 16)];
    return { host: `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, family: 4 };
  }
  return { host: v6, family: 6 };
}

/** An IPv6 address in one canonical spelling, so that two spellings of one address compare equal. */
function canonicalV6(host: string): string {
  const blocks = new BlockList();
  blocks.addAddress(host, 'ipv6');
  // BlockList keeps its rules in the canonical form: reading it back needs no parser of our own.
  return (blocks.rules[0] ?? host).replace(/^Address: IPv6 /, '').toLowerCase();
}

function isLoopback(host: string, family: number): boolean {
  const address = canonicalAddress(host, family);
  if (address.family === 4) return address.host.startsWith('127.');
  return address.host === '::1';
}
