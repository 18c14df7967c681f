// One question: what does bounding a document's nesting (nestedDeeperThan, run before every manifest,
// index, config and referrer list is parsed) cost next to the JSON.parse it guards? Builds ordinary
// manifests (layers with annotations, the largest just under the 4 MiB manifest cap), times the check
// and the parse on each, and prints the medians and their ratio.
import { MAX_JSON_DEPTH, nestedDeeperThan } from '@fastpull/core';

function manifest(layers: number): Buffer {
  const hex = (i: number): string => i.toString(16).padStart(64, '0');
  return Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: `sha256:${hex(0)}`, size: 1234 },
      layers: Array.from({ length: layers }, (_, i) => ({
        mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip',
        digest: `sha256:${hex(i + 1)}`,
        size: 1_000_000 + i,
        annotations: {
          'org.opencontainers.image.title': `layer-${i}.tar.gz`,
          'com.example.note': `built by "step ${i}" \\ of the pipeline [${'x'.repeat(200)}]`,
        },
      })),
      annotations: { 'org.opencontainers.image.created': '2026-12-07T00:00:00Z' },
    }),
  );
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1]!;
}

function time(runs: number, f: () => unknown): number {
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    f();
    out.push(performance.now() - t);
  }
  return median(out);
}

for (const layers of [10, 128, 1000, 8500]) {
  const bytes = manifest(layers);
  const runs = bytes.length > 1_000_000 ? 30 : 300;
  time(20, () => nestedDeeperThan(bytes, MAX_JSON_DEPTH));
  time(20, () => JSON.parse(bytes.toString('utf8')));
  const check = time(runs, () => nestedDeeperThan(bytes, MAX_JSON_DEPTH));
  const parse = time(runs, () => JSON.parse(bytes.toString('utf8')));
  console.log(
    `${layers} layers, ${bytes.length} bytes: depth check ${check.toFixed(3)} ms, JSON.parse ${parse.toFixed(3)} ms, check/parse ${(check / parse).toFixed(3)}`,
  );
}
