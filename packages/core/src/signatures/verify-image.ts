// Checking an image's signatures without pulling it: resolve the reference, then run the gate a pull
// would run. What `fastpull verify` prints.
import { FastpullError, isFastpullError } from '../errors.js';
import { parsePlatform, type Platform } from '../oci/platform.js';
import { formatReference, parseReference, type Reference } from '../oci/reference.js';
import type { CredentialsProvider } from '../registry/auth.js';
import { clientFor, type RegistryClient } from '../registry/client.js';
import type { ProxySettings } from '../registry/proxy.js';
import { checkSignatures, type SignatureGate } from './gate.js';
import type { ImageSignatures, SignatureSubject, SignatureVerdict } from './types.js';

/** Options of {@link verifyImageSignatures}. */
export interface VerifyImageOptions {
  /** The verifiers and limits, as a pull's `signatures`. */
  readonly gate: SignatureGate;
  /** Platform of a multi-platform image whose manifest is resolved (the signature is checked on what the name resolves to). */
  readonly platform?: string | Platform;
  /** Plain HTTP to the registry (loopback registries always may). */
  readonly plainHttp?: boolean;
  /** Credentials per registry; default none. */
  readonly credentials?: CredentialsProvider;
  /** Registry host configuration (`<dir>/<host>/hosts.toml`). */
  readonly hostsDir?: string;
  /** Proxies of registry traffic, e.g. `proxyEnvironment(process.env)`; default none. */
  readonly proxy?: ProxySettings;
  /** Deadline of each registry document read (see RegistryClientOptions.metadataTimeoutMs). */
  readonly metadataTimeoutMs?: number;
  /** A client to use instead of one of its own. */
  readonly client?: RegistryClient;
  /** Stops the check (ABORTED). */
  readonly signal?: AbortSignal;
}

/** What {@link verifyImageSignatures} found. */
export interface ImageVerification {
  /** The canonical reference checked. */
  readonly name: string;
  /** The manifest (or index) digest the signatures must sign. */
  readonly subject: SignatureSubject;
  /**
   * `verified`, `logged` or `skipped` (as a pull would record), `uncovered` when no policy covers
   * the reference, `refused` with the error a pull would fail with.
   */
  readonly outcome: ImageSignatures['outcome'] | 'uncovered' | 'refused';
  /** Each verifier's verdict (none when uncovered; those of the refusal when refused). */
  readonly verdicts: readonly SignatureVerdict[];
  /** The refusal (SIGNATURE_MISSING or SIGNATURE_INVALID) when refused. */
  readonly error?: FastpullError;
}

/**
 * Resolves `reference` and checks its signatures as a pull would, without fetching a layer. A
 * refusal is an outcome (`refused`, with the error), not a rejection; registry failures reject.
 * @example
 * const gate = { verifiers: await loadSignatureVerifiers({ signaturePolicy: '/etc/containers/policy.json' }) };
 * const v = await verifyImageSignatures('registry.example.com/app:1', { gate });
 * console.log(v.outcome);
 */
export async function verifyImageSignatures(reference: string | Reference, options: VerifyImageOptions): Promise<ImageVerification> {
  const ref = typeof reference === 'string' ? parseReference(reference) : reference;
  const platform = typeof options.platform === 'string' ? parsePlatform(options.platform) : options.platform;
  const client = options.client ?? clientFor(options);
  try {
    const resolved = await client.resolve(ref, { ...(platform ? { platform } : {}), ...(options.signal ? { signal: options.signal } : {}) });
    const subject: SignatureSubject = { reference: ref, digest: resolved.target.digest, mediaType: resolved.target.mediaType, size: resolved.target.size };
    const name = formatReference(ref);
    try {
      const result = await checkSignatures(client, subject, options.gate, options.signal);
      if (!result) return { name, subject, outcome: 'uncovered', verdicts: [] };
      return { name, subject, outcome: result.outcome, verdicts: result.verdicts };
    } catch (e) {
      if (isFastpullError(e) && (e.code === 'SIGNATURE_MISSING' || e.code === 'SIGNATURE_INVALID') && e instanceof FastpullError) {
        const verdicts = (e.details.verdicts as SignatureVerdict[] | undefined) ?? [];
        return { name, subject, outcome: 'refused', verdicts, error: e };
      }
      throw e;
    }
  } finally {
    if (!options.client) await client.close();
  }
}
