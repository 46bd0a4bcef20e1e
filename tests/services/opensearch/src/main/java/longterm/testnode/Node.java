package longterm.testnode;

import org.codelibs.opensearch.runner.OpenSearchRunner;

/**
 * Starts one OpenSearch node bound to 127.0.0.1 on the given HTTP port, with its data in the
 * given directory, prints "READY <port>" once its cluster is yellow, and stops when its
 * standard input closes (so the process that started it can never leave it behind).
 *
 * Usage: Node HTTP_PORT TRANSPORT_PORT DATA_DIR [PLUGIN_CLASS...]
 *
 * Alone (the default) the transport port is pinned, discovery is single-node and the cluster
 * name is unique per start, so the node can never join another test node on this machine.
 *
 * In a cluster (the benchmark of a node loss), every node of one cluster is started with the
 * same system properties, and its own name:
 *   -Dlongterm.cluster=NAME          the cluster's name
 *   -Dlongterm.node=NAME             this node's name, one of longterm.managers
 *   -Dlongterm.seeds=HOST:PORT,...   the transport addresses of all nodes
 *   -Dlongterm.managers=NAME,...     the nodes that elect the first cluster manager
 */
public final class Node {
    public static void main(String[] args) throws Exception {
        final int port = Integer.parseInt(args[0]);
        final int transport = Integer.parseInt(args[1]);
        final String base = args[2];
        final String seeds = System.getProperty("longterm.seeds");
        final String cluster = System.getProperty("longterm.cluster", "longterm-test-" + port);
        OpenSearchRunner.Configs configs = OpenSearchRunner.newConfigs()
                .basePath(base).numOfNode(1).clusterName(cluster).baseHttpPort(port - 1).printOnFailure();
        for (int i = 3; i < args.length; i++) {
            configs = configs.pluginTypes(args[i]);
        }
        final OpenSearchRunner runner = new OpenSearchRunner();
        runner.setMaxHttpPort(-1);
        runner.onBuild((index, settings) -> {
            settings.put("http.port", String.valueOf(port));
            settings.put("network.host", "127.0.0.1");
            settings.put("transport.port", String.valueOf(transport));
            settings.remove("cluster.initial_cluster_manager_nodes");
            settings.remove("cluster.initial_master_nodes");
            if (seeds == null) {
                settings.put("discovery.type", "single-node");
            } else {
                settings.put("node.name", System.getProperty("longterm.node"));
                settings.putList("discovery.seed_hosts", seeds.split(","));
                settings.putList("cluster.initial_cluster_manager_nodes",
                        System.getProperty("longterm.managers").split(","));
            }
            settings.put("cluster.routing.allocation.disk.threshold_enabled", false);
            settings.put("knn.memory.circuit_breaker.enabled", false);
        }).build(configs);
        runner.ensureYellow();
        System.out.println("READY " + port);
        System.out.flush();
        while (System.in.read() != -1) {
            // wait for the parent to close our stdin
        }
        runner.close();
        runner.clean();
    }
}
