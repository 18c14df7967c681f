// The remote-snapshotter fast path: when containerd's CRI plugin unpacks an image it sends, on each
// layer's Prepare, labels naming the image, its manifest and the layer's chainID. Instead of letting
// containerd download and apply the layer, fastpulld pulls the whole image with its own engine (one
// shared pull for all the image's layers), waits for this layer's chainID snapshot, records it as a
// committed snapshot that borrows that snapshot (carrying the target label, over the parent
// containerd asked for) and answers ALREADY_EXISTS: containerd finds the record and skips the layer.
// Any failure falls back to the normal path (mounts), so the pull still succeeds, except for an
// image a signature policy covers: its layers are handed over only once the pull has accepted the
// image, and a failure (a refusal above all) fails the Prepare, since containerd's own pull would
// apply what nobody verified.
import type { Logger } from 'pino';
import { FastpullError, isDigest, isFastpullError, parseReference, type Digest, type PullResult } from '@fastpull/core';
import type { SnapshotRecords, Snapshotter } from '@fastpull/core/snapshots';
import type { PrepareHook } from './service.js';

/** Label containerd puts on every unpack Prepare: the chainID the layer will have. */
export const TARGET_LABEL = 'containerd.io/snapshot.ref';
/** Labels containerd's CRI plugin adds when `disable_snapshot_annotations = false`. */
export const IMAGE_REF_LABEL = 'containerd.io/snapshot/cri.image-ref';
export const MANIFEST_LABEL = 'containerd.io/snapshot/cri.manifest-digest';
export const LAYER_LABEL = 'containerd.io/snapshot/cri.layer-digest';

/**
 * Pulls an image (by its reference and platform manifest digest) into the store, shared with any
 * pull of it already running; rejects when the pull fails or `signal` fires.
 */
export type PullForSnapshot = (ref: string, manifestDigest: Digest, signal: AbortSignal) => Promise<PullResult>;

/**
 * The signature policy in force for an image reference: undefined when none covers it; else a
 * token (the same object until the policies are loaded again) under which an accepted image stays
 * accepted for the Prepares of its other layers.
 */
export type SignaturePolicyFor = (ref: string) => Promise<object | undefined>;

/** Images accepted under one policy that are remembered: the layers of one image ask one after another. */
const ACCEPTED_KEPT = 256;

/** What the fast path needs. */
export interface FastPathOptions {
  readonly records: SnapshotRecords;
  readonly snapshots: Snapshotter;
  readonly pull: PullForSnapshot;
  readonly log: Logger;
  /** The signature policy covering an image; unset: none ever does. */
  readonly signaturePolicy?: SignaturePolicyFor;
  /** How often to look whether the layer's snapshot is committed while the pull runs. */
  readonly pollMs?: number;
}

interface FastPathLabels {
  readonly target: Digest;
  readonly ref: string;
  readonly manifest: Digest;
}

/** The fast-path labels of a Prepare, or undefined when it has none (or malformed ones). */
function fastPathLabels(labels: Readonly<Record<string, string>>): FastPathLabels | undefined {
  const target = labels[TARGET_LABEL];
  const ref = labels[IMAGE_REF_LABEL];
  const manifest = labels[MANIFEST_LABEL];
  if (!target || !ref || !manifest || !labels[LAYER_LABEL]) return undefined;
  if (!isDigest(target) || !isDigest(manifest)) return undefined;
  try {
    parseReference(ref);
  } catch {
    return undefined;
  }
  return { target, ref, manifest };
}

/**
 * Pulls the image as containerd's CRI named it (a tag resolves to the index a signer signs) and
 * resolves once the policy accepted it and the manifest is the one containerd unpacks; rejects
 * with the refusal, or with the failure that kept it from being checked. An image accepted under a
 * policy (by its token) is not pulled again for the next layer.
 */
function acceptedImages(pull: FastPathOptions['pull']): (policy: object, f: FastPathLabels, signal: AbortSignal) => Promise<void> {
  /** Per policy token: `ref\0manifest` of the images accepted under it, oldest first. */
  const accepted = new WeakMap<object, Set<string>>();
  return async (policy, f, signal) => {
    const id = `${f.ref}\0${f.manifest}`;
    let seen = accepted.get(policy);
    if (seen?.has(id)) return;
    const { image } = await pull(f.ref, f.manifest, signal);
    if (image.manifest.digest !== f.manifest) {
      throw new FastpullError(
        'FAILED_PRECONDITION',
        `${f.ref} now names manifest ${image.manifest.digest}, not ${f.manifest} that containerd is unpacking: its signatures were not checked; pull it again`,
      );
    }
    if (!seen) accepted.set(policy, (seen = new Set()));
    seen.add(id);
    if (seen.size > ACCEPTED_KEPT) seen.delete(seen.values().next().value!);
  };
}

/**
 * The Prepare hook of the fast path: 'handled' when the layer is recorded (containerd is then told
 * ALREADY_EXISTS), 'normal' when containerd should unpack it itself.
 */
export function fastPathHook(options: FastPathOptions): PrepareHook {
  const { records, snapshots, pull, log } = options;
  const pollMs = options.pollMs ?? 50;
  /** One recording per target and parent at a time: containerd may ask twice (two namespaces). */
  const inflight = new Map<string, Promise<'handled' | 'normal'>>();

  /** A committed record that already answers this Prepare (same target, same parent). */
  const recorded = (target: Digest, parent: string | undefined): boolean =>
    records.list([`kind==committed,labels."${TARGET_LABEL}"==${target}`]).some((i) => i.parent === parent);

  const record = async (
    key: string,
    target: Digest,
    parent: string | undefined,
    labels: Readonly<Record<string, string>>,
    how: 'held' | 'pulled' | 'verified',
  ): Promise<'handled'> => {
    if (!recorded(target, parent)) {
      // Unique, never the bare chainID: the same layer may sit over different parents (pitfall of
      // another namespace having unpacked a lower layer itself).
      const name = `fastpull/${key.replace(/[^A-Za-z0-9._-]+/g, '_').slice(-40)}/${target}`;
      await records.commitChain(name, parent, target, labels);
    }
    log.info({ event: 'snapshot', target, parent, layer: labels[LAYER_LABEL], image: labels[IMAGE_REF_LABEL], how }, 'layer recorded for containerd');
    return 'handled';
  };

  const verify = acceptedImages(pull);

  /** The Prepare of a layer of an image a policy covers: no layer is handed over before the verdict. */
  const handleGated = async (
    key: string,
    parent: string | undefined,
    labels: Readonly<Record<string, string>>,
    f: FastPathLabels,
    policy: object,
    signal: AbortSignal,
  ): Promise<'handled' | 'normal'> => {
    await verify(policy, f, signal);
    if (recorded(f.target, parent)) return 'handled';
    if (!(await snapshots.isCommitted(f.target))) throw new FastpullError('NOT_FOUND', `the pulled image has no layer with chainID ${f.target}`);
    // containerd applies the layer itself from the manifest just accepted: what it fetches is checked against that.
    if (!(await parentMatches(records, snapshots, f.target, parent))) return 'normal';
    return record(key, f.target, parent, labels, 'verified');
  };

  const handle = async (
    key: string,
    parent: string | undefined,
    labels: Readonly<Record<string, string>>,
    f: FastPathLabels,
    signal: AbortSignal,
  ): Promise<'handled' | 'normal'> => {
    if (recorded(f.target, parent)) {
      log.debug({ event: 'snapshot', target: f.target, parent, how: 'recorded' }, 'layer already recorded for containerd');
      return 'handled';
    }
    if (await snapshots.isCommitted(f.target)) {
      if (!(await parentMatches(records, snapshots, f.target, parent))) return 'normal';
      return record(key, f.target, parent, labels, 'held');
    }
    const name = parseReference(f.ref);
    const byDigest = `${name.registry}/${name.repository}@${f.manifest}`;
    const pulling = pull(byDigest, f.manifest, signal);
    pulling.catch(() => undefined); // its failure is handled through layerCommitted
    // containerd's unpack waits on this Prepare for as long as the pull takes: say so, or a slow
    // or stuck pull shows nowhere between its start and its end.
    log.debug({ event: 'snapshot', target: f.target, parent, image: f.ref }, 'waiting for the pull to bring the layer');
    await layerCommitted(snapshots, f.target, pulling, signal, pollMs);
    if (!(await parentMatches(records, snapshots, f.target, parent))) return 'normal';
    return record(key, f.target, parent, labels, 'pulled');
  };

  return async ({ key, parent, labels, signal }) => {
    const f = fastPathLabels(labels);
    if (!f) return 'normal';
    const policy = await options.signaturePolicy?.(f.ref);
    // A gated Prepare joins only one of the same layer of the same image: not an ungated one, nor
    // one of another image sharing the layer, since its answer waits for its own image's verdict.
    const id = `${policy ? f.manifest : ''}\0${f.target}\0${parent ?? ''}`;
    let running = inflight.get(id);
    if (!running) {
      running = (policy ? handleGated(key, parent, labels, f, policy, signal) : handle(key, parent, labels, f, signal)).catch((e: unknown) =>
        fallBack(log, f, policy !== undefined, e),
      );
      inflight.set(id, running);
      void running.finally(() => inflight.delete(id)).catch(() => undefined);
    }
    return running;
  };
}

/**
 * Whether `parent` (containerd's backend name) stands for the layers below `target`: the chainID
 * the parent record carries must be the parent chainID of fastpull's snapshot. A parent that
 * containerd unpacked itself carries the target label of its own Prepare.
 */
async function parentMatches(records: SnapshotRecords, snapshots: Snapshotter, target: Digest, parent: string | undefined): Promise<boolean> {
  const info = await snapshots.info(target);
  if (!info) return false;
  if (parent === undefined) return info.parent === undefined;
  let stat;
  try {
    stat = records.stat(parent);
  } catch {
    return false;
  }
  const parentChain = records.chainOf(parent) ?? stat.labels[TARGET_LABEL];
  return parentChain !== undefined && parentChain === info.parent;
}

/**
 * Resolves when `target` is committed in the store, or rejects with the pull's failure; looks every
 * `pollMs` while the pull runs.
 */
function layerCommitted(snapshots: Snapshotter, target: Digest, pulling: Promise<PullResult>, signal: AbortSignal, pollMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let done = false;
    const finish = (e?: unknown): void => {
      if (done) return;
      done = true;
      clearInterval(timer);
      if (e === undefined) resolve();
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the pull's own failure, passed on as it came
      else reject(e);
    };
    const timer = setInterval(() => {
      if (signal.aborted) finish(new FastpullError('ABORTED', `waiting for layer ${target}: the Prepare call was cancelled`));
      else void snapshots.isCommitted(target).then((yes) => yes && finish(), finish);
    }, pollMs);
    pulling.then(
      async () =>
        (await snapshots.isCommitted(target)) ? finish() : finish(new FastpullError('NOT_FOUND', `the pulled image has no layer with chainID ${target}`)),
      (e: unknown) => finish(e),
    );
  });
}

/**
 * A fast path that failed: containerd unpacks the layer itself ('normal'), unless a signature policy
 * covers the image (`gated`): containerd's own pull would then apply layers of an image nobody
 * verified, so the Prepare fails, and containerd's pull with it, with this message (kubelet shows it
 * in the pod's events).
 */
function fallBack(log: Logger, f: FastPathLabels, gated: boolean, e: unknown): 'normal' {
  const code = isFastpullError(e) ? e.code : 'INTERNAL';
  const what = { event: 'snapshot', target: f.target, image: f.ref, code, err: e instanceof Error ? e.message : String(e) };
  if (!gated) {
    log.warn(what, 'fast path failed; containerd unpacks the layer itself');
    return 'normal';
  }
  log.warn(what, 'fast path failed under a signature policy; the Prepare fails');
  throw gatedFailure(f.ref, e);
}

/** The failure a Prepare of a gated image answers with: the code kept, the message saying who refused what. */
function gatedFailure(ref: string, e: unknown): FastpullError {
  const fe = isFastpullError(e) ? e : new FastpullError('INTERNAL', e instanceof Error ? e.message : String(e), { cause: e });
  if (fe.code === 'SIGNATURE_MISSING' || fe.code === 'SIGNATURE_INVALID')
    return new FastpullError(fe.code, `fastpull: ${fe.message}`, { details: fe.details, cause: fe });
  // An abort is containerd's own cancellation: it needs no more words.
  if (fe.code === 'ABORTED') return fe;
  return new FastpullError(
    fe.code,
    `fastpull: ${ref} is covered by a signature policy and could not be checked, so containerd may not pull it itself: ${fe.message}`,
    { details: fe.details, cause: fe },
  );
}
