import { describe, expect, it } from 'vitest';
import { limitTerms } from './limit.js';

describe('limitTerms', () => {
  const parts = { cores: 2, network: 1, toolsCpu: 5, largestInflate: 0.8, disk: 2.9 };

  it('counts receiving and serving the blobs in the CPU term with the download, not in the tools-only one', () => {
    const { terms, bound, dominant } = limitTerms({ ...parts, download: { cpu: 0.6, serverCpu: 0.8 } });
    expect(terms.cpu).toBeCloseTo(2.5);
    expect(terms['cpu with download']).toBeCloseTo(3.2);
    expect(dominant).toBe('cpu with download');
    expect(bound).toBeCloseTo(3.2);
  });

  it('counts only the receiving when the server was not measured, and lets another term dominate', () => {
    const { terms, bound, dominant } = limitTerms({ ...parts, download: { cpu: 0.6 } });
    expect(terms['cpu with download']).toBeCloseTo(2.8);
    expect(dominant).toBe('disk');
    expect(bound).toBeCloseTo(2.9);
  });

  it('is the network term when the download is the slowest', () => {
    const { bound, dominant } = limitTerms({ ...parts, network: 9, download: { cpu: 0.1, serverCpu: 0.1 } });
    expect(dominant).toBe('network');
    expect(bound).toBe(9);
  });
});
