// The proxy rules read as containerd's Go client reads HTTP_PROXY, HTTPS_PROXY and NO_PROXY.
import { describe, expect, it } from 'vitest';
import { isFastpullError } from '../errors.js';
import { proxyEnvironment, ProxyRules, type ProxySettings } from './proxy.js';

const PROXY = 'http://proxy.example:3128';

/** The proxy's name for `url` under `settings`, or 'direct'. */
function route(settings: ProxySettings, url: string): string {
  return new ProxyRules(settings).forUrl(new URL(url))?.name ?? 'direct';
}

describe('proxyEnvironment', () => {
  it('prefers the upper-case variable, falls back to the lower-case one, and ignores empty values', () => {
    expect(proxyEnvironment({ HTTPS_PROXY: 'http://a:1', https_proxy: 'http://b:2' })).toEqual({ httpsProxy: 'http://a:1' });
    expect(proxyEnvironment({ HTTPS_PROXY: '', https_proxy: 'http://b:2' })).toEqual({ httpsProxy: 'http://b:2' });
    expect(proxyEnvironment({ http_proxy: 'p:1', no_proxy: 'x', NO_PROXY: 'y' })).toEqual({ httpProxy: 'p:1', noProxy: 'y' });
    expect(proxyEnvironment({})).toEqual({});
  });
});

describe('ProxyRules', () => {
  it('uses HTTPS_PROXY for https and HTTP_PROXY for http, neither for the other', () => {
    expect(route({ httpsProxy: PROXY }, 'https://registry.example/v2/')).toBe(PROXY);
    expect(route({ httpsProxy: PROXY }, 'http://registry.example/v2/')).toBe('direct');
    expect(route({ httpProxy: PROXY }, 'https://registry.example/v2/')).toBe('direct');
    expect(route({ httpProxy: PROXY }, 'http://registry.example/v2/')).toBe(PROXY);
  });

  it('reads host:port as an http:// proxy, and takes credentials apart from the name', () => {
    const rules = new ProxyRules({ httpsProxy: 'user:p%40ss@proxy.example:3128' });
    const proxy = rules.forUrl(new URL('https://registry.example/'))!;
    expect(proxy.name).toBe('http://proxy.example:3128');
    expect(proxy.port).toBe(3128);
    expect(proxy.authorization).toBe(`Basic ${Buffer.from('user:p@ss').toString('base64')}`);
    expect(new ProxyRules({ httpsProxy: '10.1.1.1:8080' }).forUrl(new URL('https://r.example/'))?.name).toBe('http://10.1.1.1:8080');
    expect(new ProxyRules({ httpsProxy: 'proxy.example' }).forUrl(new URL('https://r.example/'))?.port).toBe(80);
  });

  it('never proxies localhost or loopback addresses, whatever NO_PROXY says', () => {
    for (const url of ['https://localhost:5000/', 'https://127.0.0.1/', 'https://127.3.2.1:5000/', 'https://[::1]:5000/', 'https://[::ffff:127.0.0.1]/']) {
      expect(route({ httpsProxy: PROXY }, url), url).toBe('direct');
    }
    // A name that resolves to loopback is a name: the proxy gets it, as Go's client sends it.
    expect(route({ httpsProxy: PROXY }, 'https://localhost.example/')).toBe(PROXY);
    // proxyLoopback is for tests only: it is never read from the environment.
    expect(route({ httpsProxy: PROXY, proxyLoopback: true }, 'https://127.0.0.1:5000/')).toBe(PROXY);
    expect(proxyEnvironment({ HTTPS_PROXY: PROXY, PROXY_LOOPBACK: '1', proxyLoopback: 'true' })).not.toHaveProperty('proxyLoopback');
  });

  it('matches NO_PROXY domains: a bare name and its subdomains, a leading dot or *. only subdomains', () => {
    const s = (noProxy: string) => ({ httpsProxy: PROXY, noProxy });
    expect(route(s('example.com'), 'https://example.com/')).toBe('direct');
    expect(route(s('example.com'), 'https://registry.example.com/')).toBe('direct');
    expect(route(s('example.com'), 'https://badexample.com/')).toBe(PROXY);
    expect(route(s('.example.com'), 'https://example.com/')).toBe(PROXY);
    expect(route(s('.example.com'), 'https://a.b.example.com/')).toBe('direct');
    expect(route(s('*.example.com'), 'https://example.com/')).toBe(PROXY);
    expect(route(s('*.example.com'), 'https://r.example.com/')).toBe('direct');
    expect(route(s(' Other.Org , EXAMPLE.com '), 'https://Registry.Example.COM/')).toBe('direct');
    expect(route(s('*'), 'https://anything.example/')).toBe('direct');
    expect(route(s('a.org,*'), 'https://10.0.0.1/')).toBe('direct');
  });

  it('matches NO_PROXY ports against the request port, 443 or 80 by default', () => {
    const s = (noProxy: string) => ({ httpsProxy: PROXY, httpProxy: PROXY, noProxy });
    expect(route(s('example.com:5000'), 'https://example.com:5000/')).toBe('direct');
    expect(route(s('example.com:5000'), 'https://example.com/')).toBe(PROXY);
    expect(route(s('example.com:443'), 'https://example.com/')).toBe('direct');
    expect(route(s('example.com:443'), 'http://example.com/')).toBe(PROXY);
    expect(route(s('10.1.2.3:80'), 'http://10.1.2.3/')).toBe('direct');
    expect(route(s('[2001:db8::1]:5000'), 'https://[2001:db8::1]:5000/')).toBe('direct');
    expect(route(s('[2001:db8::1]:5000'), 'https://[2001:db8::1]/')).toBe(PROXY);
  });

  it('matches NO_PROXY addresses and CIDR blocks against addresses only, never names against addresses', () => {
    const s = (noProxy: string) => ({ httpsProxy: PROXY, noProxy });
    expect(route(s('10.0.0.0/8'), 'https://10.20.30.40/')).toBe('direct');
    expect(route(s('10.0.0.0/8'), 'https://11.0.0.1/')).toBe(PROXY);
    expect(route(s('10.0.0.0/8'), 'https://ten.example/')).toBe(PROXY);
    expect(route(s('2001:db8::/32'), 'https://[2001:db8:1::5]/')).toBe('direct');
    expect(route(s('2001:DB8:0::1'), 'https://[2001:db8::1]/')).toBe('direct');
    expect(route(s('192.168.1.5'), 'https://192.168.1.5:5000/')).toBe('direct');
    expect(route(s('192.168.1.5'), 'https://192.168.1.6/')).toBe(PROXY);
    // A domain entry does not match an address, as in Go.
    expect(route(s('168.1.5'), 'https://192.168.1.5/')).toBe(PROXY);
    // Entries that cannot be read are ignored, the rest apply.
    expect(route(s(':5000,10.0.0.0/99,example.com'), 'https://example.com/')).toBe('direct');
  });

  it('refuses a proxy it cannot speak to when a request would use it, naming it without credentials', () => {
    const rules = new ProxyRules({ httpsProxy: 'socks5://user:secret@proxy.example:1080', noProxy: 'direct.example' });
    expect(rules.forUrl(new URL('https://direct.example/'))).toBeUndefined();
    let error: unknown;
    try {
      rules.forUrl(new URL('https://registry.example/'));
    } catch (e) {
      error = e;
    }
    expect(isFastpullError(error) && error.code).toBe('INVALID_ARGUMENT');
    expect((error as Error).message).toContain('HTTPS_PROXY socks5://proxy.example:1080');
    expect((error as Error).message).not.toContain('secret');
  });
});
