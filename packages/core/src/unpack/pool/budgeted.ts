// The passes a pool runs now for each pull with a CPU budget of its own: such a pull takes no more
// of the pool's slots than its cores can keep busy (the rest would only share those cores).
import type { PullCpuBudget } from '../../util/pull-cpu.js';

/** Passes running per pull budget, against the most each may run (`most(cores)`). */
export class BudgetedPasses {
  private readonly running = new Map<PullCpuBudget, number>();

  constructor(private readonly most: (cores: number) => number) {}

  /** Whether a pass of the pull with `budget` may start now (always, without a budget or once it is lifted). */
  allows(budget: PullCpuBudget | undefined): boolean {
    const cores = budget?.cores;
    return cores === undefined || (this.running.get(budget!) ?? 0) < this.most(cores);
  }

  started(budget: PullCpuBudget | undefined): void {
    if (budget) this.running.set(budget, (this.running.get(budget) ?? 0) + 1);
  }

  ended(budget: PullCpuBudget | undefined): void {
    if (!budget) return;
    const n = this.running.get(budget)! - 1;
    if (n === 0) this.running.delete(budget);
    else this.running.set(budget, n);
  }
}
