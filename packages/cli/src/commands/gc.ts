// `fastpull gc`: remove the snapshots and blobs that no image, running pull or mount refers to.
import { Command } from 'commander';
import type { GcLeftover } from '@fastpull/core';
import { doing } from '../errors.js';
import { formatBytes, shortDigest, writeJSON, writeLine, type CliIO } from '../io.js';
import { jsonOption, rootOption, withExample } from '../options.js';
import { addressOption } from '../remote.js';
import { withService } from '../service.js';

export function gcCommand(io: CliIO, signal: AbortSignal): Command {
  const command = new Command('gc')
    .description('remove snapshots and blobs that no image, running pull or mount refers to, and what dead processes left behind')
    .option('--dry-run', 'say what would be removed, remove nothing')
    .option('-v, --verbose', 'name each snapshot, blob and leftover removed')
    .addOption(rootOption(io.env))
    .addOption(jsonOption('print {"snapshots": [...], "blobs": [...], "litter": n, "leftovers": [...], "bytes": n, "images": [...]} as JSON'))
    .addOption(addressOption());
  return withExample(command, ['fastpull gc', 'fastpull gc --dry-run --verbose']).action(
    async (flags: { root: string; dryRun?: boolean; verbose?: boolean; json?: boolean; address?: string }) => {
      const options = { signal, ...(flags.dryRun ? { dryRun: true } : {}) };
      const r = await withService(io, flags, command, (service) => doing(`collecting garbage in ${service.location}`, () => service.collectGarbage(options)));
      if (flags.json) {
        writeJSON(io.stdout, { dryRun: flags.dryRun === true, ...r });
        return;
      }
      const verb = flags.dryRun ? 'would remove' : 'removed';
      // Records fastpulld's snapshotter held for containerd go once containerd lets go of the image.
      for (const i of r.images) writeLine(io.stdout, `${verb} image record ${i.name} (${i.platform}): held for containerd, which no longer uses it`);
      if (flags.verbose) {
        for (const s of r.snapshots) writeLine(io.stdout, `${verb} snapshot ${shortDigest(s.chainID)} (${formatBytes(s.size)})`);
        for (const b of r.blobs) writeLine(io.stdout, `${verb} blob ${shortDigest(b.digest)} (${formatBytes(b.size)})`);
        for (const l of r.leftovers ?? []) writeLine(io.stdout, `${verb} ${LEFTOVER_WORDS[l.kind]} ${l.path}`);
      }
      writeLine(
        io.stdout,
        `${verb} ${r.snapshots.length} snapshots and ${r.blobs.length} blobs, ${r.litter} leftovers of interrupted pulls: ${formatBytes(r.bytes)}`,
      );
    },
  );
}

/** How `-v` calls each kind of leftover. */
const LEFTOVER_WORDS: Record<GcLeftover['kind'], string> = {
  lease: 'lease of a dead process',
  ingest: 'partial download',
  active: 'half-written snapshot',
  trash: 'half-deleted snapshot',
  temp: 'temporary file',
};
