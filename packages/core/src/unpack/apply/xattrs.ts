// Extended attributes from an entry's `SCHILY.xattr.*` PAX records, set on what it made without following symlinks.
import { isUtf8 } from 'node:buffer';
import { FastpullError } from '../../errors.js';
import { nativeFs } from '../../native/addon.js';
import { display, errnoOf, type RawRoot } from './rawpath.js';
import type { ApplyReport } from './report.js';
import type { ParsedTarEntry } from '../tar/tarreader.js';

const XATTR_PAX_PREFIX = 'SCHILY.xattr.';

/** How many extended attributes the entry carries, and their names' and values' bytes together. */
export function xattrFootprint(e: ParsedTarEntry): { count: number; bytes: number } {
  let count = 0;
  let bytes = 0;
  for (const [key, value] of e.pax) {
    if (!key.startsWith(XATTR_PAX_PREFIX)) continue;
    count++;
    bytes += key.length - XATTR_PAX_PREFIX.length + value.length;
  }
  return { count, bytes };
}

/** Whether the entry carries extended attributes (setXattrs has something to set). */
export function hasXattrs(e: ParsedTarEntry): boolean {
  for (const key of e.pax.keys()) if (key.startsWith(XATTR_PAX_PREFIX)) return true;
  return false;
}

/**
 * Sets the entry's xattrs on `rel` itself. Overlay's own (`trusted.overlay.*`, `user.overlay.*`)
 * are refused (HOSTILE_LAYER); other `trusted.*` ones, and any the filesystem or our privilege
 * refuses (ENOTSUP, EPERM), are dropped with a warning; a name that is not UTF-8 or a value the
 * kernel calls invalid is INVALID_LAYER.
 */
export function setXattrs(paths: RawRoot, report: ApplyReport, rel: string, e: ParsedTarEntry): void {
  for (const [key, value] of e.pax) {
    if (!key.startsWith(XATTR_PAX_PREFIX)) continue;
    const rawName = key.slice(XATTR_PAX_PREFIX.length);
    const nameBytes = Buffer.from(rawName, 'latin1');
    if (!isUtf8(nameBytes)) report.refuse('INVALID_LAYER', `xattr name ${JSON.stringify(display(rawName))} is not UTF-8`);
    const name = nameBytes.toString('utf8');
    // Overlay reads trusted.overlay.* (and user.overlay.* when mounted with userxattr) as its own
    // metadata: a layer that sets them could forge whiteouts, opaque dirs, redirects or origins.
    if (name.startsWith('trusted.overlay.') || name.startsWith('user.overlay.')) {
      report.refuse('HOSTILE_LAYER', `xattr ${name} is overlayfs's own metadata`, { xattr: name });
    }
    if (name.startsWith('trusted.')) {
      report.warn(`${report.label}: dropped xattr ${name}: trusted.* is reserved for the host`, false);
      continue;
    }
    try {
      paths.native(rel, false, (p) => nativeFs().lsetxattr(p, name, value));
    } catch (err) {
      const code = errnoOf(err);
      if (code === 'ENOTSUP' || code === 'EPERM') {
        report.warn(`${report.label}: dropped xattr ${name}: ${code}`, false);
      } else if (code === 'EINVAL' || code === 'ERANGE' || code === 'E2BIG') {
        throw new FastpullError('INVALID_LAYER', `${report.label}: invalid xattr ${name}`, { cause: err, details: { ...report.entryDetails, xattr: name } });
      } else {
        throw err;
      }
    }
  }
}
