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

  it('counts the registry serving from a cold page cache in a term of its own, which bounds the pull when larger', () => {
    const { terms, bound, dominant } = limitTerms({ ...parts, download: { cpu: 0.6, serverCpu: 0.8, coldServerCpu: 2.4 } });
    expect(terms['cpu with download']).toBeCloseTo(3.2);
    expect(terms['cpu with cold download']).toBeCloseTo(4.0);
    expect(dominant).toBe('cpu with cold download');
    expect(bound).toBeCloseTo(4.0);
  });

  it('never counts a cold serving below the warm one (a run too short to see the cold reads)', () => {
    const { terms } = limitTerms({ ...parts, download: { cpu: 0.6, serverCpu: 0.8, coldServerCpu: 0.2 } });
    expect(terms['cpu with cold download']).toBeCloseTo(3.2);
  });

  it('is the network term when the download is the slowest', () => {
    const { bound, dominant } = limitTerms({ ...parts, network: 9, download: { cpu: 0.1, serverCpu: 0.1 } });
    expect(dominant).toBe('network');
    expect(bound).toBe(9);
  });
});
