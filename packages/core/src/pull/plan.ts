// Planning a pull: which layers an image has (with their chainIDs), which of them the store already
// holds unpacked (skipped), and which blobs it already holds (unpacked without a download).
import { FastpullError } from '../errors.js';
import { chainIDs } from '../oci/chainid.js';
import { layerCompression } from '../oci/mediatypes.js';
import type { ImageLayer } from '../images/store.js';
import type { ResolvedImage } from '../registry/client.js';
import type { Store } from '../store/root.js';
import { MAX_OVERLAY_LAYERS, tooManyLayers } from '../snapshots/store.js';

/**
 * The layers of a resolved image, bottom first, each with its diffID and chainID. Throws
 * INVALID_MANIFEST for an image without layers, TOO_MANY_LAYERS for one of more than
 * MAX_OVERLAY_LAYERS (no overlay mount can stack it), UNSUPPORTED_MEDIA_TYPE for a layer that is not a
 * container layer (a manifest listing, say, a Helm chart or a signature).
 */
export function imageLayers(name: string, resolved: ResolvedImage): ImageLayer[] {
  // Before a chainID is computed or a byte of a layer fetched: a stack no overlay can mount would
  // only be downloaded and unpacked to be refused at its first mount.
  if (resolved.manifest.layers.length > MAX_OVERLAY_LAYERS) throw tooManyLayers(name, resolved.manifest.layers.length);
  const diffIDs = resolved.config.rootfs.diff_ids;
  const chains = chainIDs(diffIDs);
  const layers: ImageLayer[] = resolved.manifest.layers.map((d, i) => ({
    digest: d.digest,
    size: d.size,
    mediaType: d.mediaType,
    diffID: diffIDs[i]!,
    chainID: chains[i]!,
  }));
  if (layers.length === 0) throw new FastpullError('INVALID_MANIFEST', `${name}: image has no layers`);
  for (const l of layers) {
    if (layerCompression(l.mediaType) === undefined) {
      throw new FastpullError('UNSUPPORTED_MEDIA_TYPE', `${name}: layer ${l.digest} has media type ${l.mediaType}, not a container layer`, {
        details: { mediaType: l.mediaType },
      });
    }
  }
  return layers;
}

/**
 * True when the layer's snapshot is committed, so the pull skips the layer. A snapshot laid out
 * for the other kind of mount cannot serve this pull (overlayfs reads either trusted.overlay.* or,
 * with userxattr, user.overlay.*, never both in one mount): INVALID_ARGUMENT.
 */
export async function isUnpacked(store: Store, layer: ImageLayer, rootless: boolean): Promise<boolean> {
  const info = await store.snapshots.info(layer.chainID);
  if (info === undefined) return false;
  if ((info.rootless === true) !== rootless) {
    throw new FastpullError(
      'INVALID_ARGUMENT',
      `layer ${layer.digest}: the store at ${store.root} holds it unpacked for ${info.rootless === true ? 'rootless' : 'rootful'} overlay mounts, and this pull is ${rootless ? 'rootless' : 'rootful'}; use a separate store root for each`,
      { details: { chainID: layer.chainID, storeRootless: info.rootless === true, rootless } },
    );
  }
  return true;
}

/** True when the layer's blob is committed in the store at its size: it is unpacked from there, not fetched. */
export async function hasBlob(store: Store, layer: ImageLayer): Promise<boolean> {
  const have = await store.content.info(layer.digest);
  return have !== undefined && have.size === layer.size;
}
