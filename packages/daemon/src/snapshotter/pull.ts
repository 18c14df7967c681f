// The pulls the fast path asks for, through the daemon's shared pulls: every layer's Prepare of one
// image (and any fastpull.v1 Pull of the same reference) joins one pull.
import { FastpullError, formatReference, parseReference, type Digest, type LocalService, type PulledImage, type PullResult } from '@fastpull/core';
import { pullKey, type PullManager } from '../pulls.js';
import type { PullForSnapshot, SignaturePolicyFor } from './fastpath.js';

/**
 * A PullForSnapshot over the daemon's PullManager and service. Pulls carry no credentials of their
 * own (containerd passes none in labels): the daemon's credential sources serve them. Their image
 * records are held for containerd: collection drops one once no containerd record uses its layers.
 */
export function sharedSnapshotPuller(pulls: PullManager<PulledImage>, service: LocalService, keepBlobs: boolean): PullForSnapshot {
  return (ref: string, _manifest: Digest, signal: AbortSignal) =>
    new Promise<PullResult>((resolve, reject) => {
      const name = formatReference(parseReference(ref));
      // The same key as a fastpull.v1 Pull of this reference without platform or credentials: they
      // share one pull, and the record is marked as whichever of the two started it asked.
      const key = pullKey({ name, plainHttp: false, keepBlobs, trace: false });
      // A container start waits on this pull: it goes first (and raises a background pull it joins,
      // lifting the rate limit and the CPU budget that pull's caller gave it).
      const { leave } = pulls.join(
        key,
        name,
        (s, onProgress, _onTrace, ticket) => service.pull(name, { signal: s, onProgress, heldFor: 'containerd', ticket }),
        {
          progress: () => undefined,
          finish: resolve,
          fail: reject,
        },
        { priority: 'high' },
      );
      // Leaving stops this caller's share only: the pull goes on while another caller waits for it.
      const cancel = (): void => {
        leave();
        reject(new FastpullError('ABORTED', `pulling ${name} for containerd: the caller went away`));
      };
      if (signal.aborted) cancel();
      else signal.addEventListener('abort', cancel, { once: true });
    });
}

/**
 * The signature policy of the daemon's service for an image: the verifiers in force (a new array
 * each time the policies are loaded again) when one of them covers the reference, else undefined.
 */
export function servicePolicy(service: LocalService): SignaturePolicyFor {
  return async (ref: string) => {
    const verifiers = await service.signatureVerifiers();
    const reference = parseReference(ref);
    return verifiers.some((v) => v.covers(reference)) ? verifiers : undefined;
  };
}
