export {
  createOtelSink,
  DURATION_BUCKETS,
  INSTRUMENTATION_NAME,
  INSTRUMENTATION_VERSION,
  type ObserveReplayRateOptions,
  OTEL_NAMES,
  type OtelSinkOptions,
  observeReplayRate,
} from './otel-sink.js';
