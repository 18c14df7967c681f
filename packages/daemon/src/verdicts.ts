// Signature verdicts as fastpulld reports them: one log line and one count per pull of an image a
// signature policy covered, accepted or refused; and the policies in force as log lines show them.
import type { Logger } from 'pino';
import { isFastpullError, verdictLine, type PulledImage, type SignatureVerdict } from '@fastpull/core';
import type { DaemonMetrics } from './metrics.js';
import type { PullOutcome } from './pulls.js';

/** The verdict of a settled pull, as logged and counted. */
export interface PullVerdict {
  /** The image's (verified, logged, skipped), or a refusal's (missing, invalid). */
  readonly outcome: string;
  readonly verdicts: readonly SignatureVerdict[];
}

/**
 * The signature verdict of a settled pull: the image's, recorded with it; a refusal's, from the
 * error; undefined when no policy covered the image (or the pull failed otherwise).
 */
export function pullVerdict(o: PullOutcome<PulledImage>): PullVerdict | undefined {
  const recorded = o.result?.image.signatures;
  if (recorded) return recorded;
  if (!isFastpullError(o.error) || (o.error.code !== 'SIGNATURE_MISSING' && o.error.code !== 'SIGNATURE_INVALID')) return undefined;
  const verdicts = o.error.details.verdicts;
  return { outcome: o.error.code === 'SIGNATURE_MISSING' ? 'missing' : 'invalid', verdicts: Array.isArray(verdicts) ? (verdicts as SignatureVerdict[]) : [] };
}

/** Logs and counts the verdict of a settled pull, once; returns it (undefined: no policy covered the image). */
export function logVerdict(log: Logger, metrics: DaemonMetrics, o: PullOutcome<PulledImage>): PullVerdict | undefined {
  const verdict = pullVerdict(o);
  if (!verdict) return undefined;
  metrics.signatureVerdicts.inc({ outcome: verdict.outcome });
  const refused = verdict.outcome === 'missing' || verdict.outcome === 'invalid';
  log[refused ? 'warn' : 'info'](
    {
      event: 'signature',
      image: o.name,
      ...(o.result ? { manifest: o.result.image.manifest.digest } : {}),
      outcome: verdict.outcome,
      verdicts: verdict.verdicts.map(verdictLine),
    },
    refused ? 'image refused by its signature policy' : 'image signatures checked',
  );
  return verdict;
}

/** The signature policies in force, as log lines show them (null: that kind is not verified). */
export function signatureLog(c: { readonly signaturePolicy?: string; readonly notationConfig?: string }): {
  signaturePolicy: string | null;
  notationConfig: string | null;
} {
  return { signaturePolicy: c.signaturePolicy ?? null, notationConfig: c.notationConfig ?? null };
}
