// One bounded HTTP exchange with an OCSP responder or a CRL distribution point. The specification
// supports only http URLs for both (the answers are signed, so TLS adds nothing but a second chain to
// check). What a certificate names is not trusted: the URL must be http, redirects are not followed,
// the answer is cut off past its size limit and the whole exchange past its time limit.
import { request } from 'node:http';

export interface BoundedRequest {
  readonly method: 'GET' | 'POST';
  readonly body?: Uint8Array;
  readonly contentType?: string;
  /** Bytes of the answer read at most; a longer one fails. */
  readonly maxBytes: number;
  /** Milliseconds from the request to the last byte of the answer. */
  readonly timeoutMs: number;
  /** The verification's own signal (the pull stopped, the verification's time is up). */
  readonly signal?: AbortSignal;
}

/** Parses a URL a certificate names; only `http:` is accepted. Throws with the reason. */
export function httpURL(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`${JSON.stringify(text.slice(0, 200))} is not a URL`);
  }
  if (url.protocol !== 'http:') throw new Error(`${url.protocol.slice(0, -1)} URLs are not supported (http only, as the specification says)`);
  if (url.username || url.password) throw new Error('a URL with credentials is not used');
  return url;
}

/**
 * Sends one request and resolves with the body of a 200 answer; rejects with what went wrong (refused,
 * timed out, another status, a redirect, too large). Never follows a redirect.
 */
export function fetchBounded(url: URL, req: BoundedRequest): Promise<Buffer> {
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
  return new Promise<Buffer>((resolve, reject) => {
    const fail = (e: Error): void => reject(timeout.aborted ? new Error(`no answer within ${req.timeoutMs} ms`) : e);
    const headers: Record<string, string | number> = { accept: '*/*' };
    if (req.body) {
      headers['content-type'] = req.contentType ?? 'application/octet-stream';
      headers['content-length'] = req.body.length;
    }
    const r = request(url, { method: req.method, headers, signal, agent: false }, (res) => {
      const status = res.statusCode ?? 0;
      if (status !== 200) {
        const where = status >= 300 && status < 400 && res.headers.location ? ` (a redirect to ${res.headers.location.slice(0, 200)}, not followed)` : '';
        fail(new Error(`HTTP status ${status}${where}`));
        res.destroy();
        return;
      }
      const declared = Number(res.headers['content-length']);
      if (declared > req.maxBytes) {
        fail(new Error(`the answer is ${declared} bytes, more than ${req.maxBytes}`));
        res.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > req.maxBytes) {
          // Settled first: destroying the answer emits its own events, which must not name the cause.
          fail(new Error(`the answer is more than ${req.maxBytes} bytes`));
          res.destroy();
          return;
        }
        chunks.push(chunk);
      });
      res.on('end', () => resolve(Buffer.concat(chunks)));
      res.on('error', fail);
      res.on('aborted', () => fail(new Error('the answer was cut off')));
    });
    r.on('error', fail);
    r.end(req.body);
  });
}
