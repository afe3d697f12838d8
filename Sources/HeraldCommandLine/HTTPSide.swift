// `serve --http`: the service's HTTP side, and swift-metrics bootstrapped onto its Prometheus registry.
import HeraldRuntime
import Metrics

public enum HTTPSide {
    /// Serves /metrics, /healthz and /readyz for `service` (started) on host:port; swift-metrics'
    /// global system reports into the same registry.
    public static func start(_ service: HeraldService, host: String, port: Int) throws(ServiceError) -> ServiceObservability {
        let observability = ServiceObservability(service: service)
        MetricsSystem.bootstrap(observability.factory)
        try observability.start(host: host, port: port)
        return observability
    }

    /// The same for a cluster member (`--instance`): its own series and its partitions'.
    public static func start(_ member: ClusterMember, host: String, port: Int) throws(ServiceError) {
        try member.startHTTP(host: host, port: port)
        if let factory = member.metricsFactory { MetricsSystem.bootstrap(factory) }
    }
}
