import { startTracing } from '@cairn/tracing';

// Tracing first (ADR 0031): on, it must hook `pg` and `http` before anything loads them; off, it loads nothing.
await startTracing('cairn-projector');
await import('./serve.js');
