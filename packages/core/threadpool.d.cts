// Types of threadpool.cjs.
/** Pool threads for a machine with `cores` cores: three per unpack worker and four for file calls, at most 1024. */
export declare function threadPoolSize(cores: number): number;
/** Sets UV_THREADPOOL_SIZE in `env` unless it is set already; returns what it holds. */
export declare function sizeThreadPool(env?: NodeJS.ProcessEnv, cores?: number): string;
