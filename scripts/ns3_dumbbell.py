"""The tbf dumbbell of scenarios/examples/tbf-dumbbell.toml in ns-3 (PyPI wheel `ns3`), for
scripts/ns3-compare.sh: one BBR and one CUBIC sender, 10 ms RTT, 1 Gbit/s links, a TBF
(10 Mbit/s, 50 KB bucket, 2-packet queue: nearly a policer) on the router's egress.
Prints one JSON line: per-flow goodput and the wall time of Simulator::Run."""
import json
import sys
import time

from ns import ns

DURATION = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0

ns.Config.SetDefault("ns3::TcpSocket::SegmentSize", ns.UintegerValue(1448))
ns.Config.SetDefault("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
ns.Config.SetDefault("ns3::TcpSocket::DelAckCount", ns.UintegerValue(2))
ns.Config.SetDefault("ns3::TcpSocket::SndBufSize", ns.UintegerValue(64 << 20))
ns.Config.SetDefault("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(64 << 20))
ns.Config.SetDefault("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))
ns.Config.SetDefault("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MilliSeconds(200)))

senders = ns.NodeContainer()
senders.Create(2)
router = ns.NodeContainer()
router.Create(1)
receiver = ns.NodeContainer()
receiver.Create(1)

p2p = ns.PointToPointHelper()
p2p.SetDeviceAttribute("DataRate", ns.StringValue("1Gbps"))
p2p.SetChannelAttribute("Delay", ns.StringValue("2500us"))
stack = ns.InternetStackHelper()
stack.Install(senders)
stack.Install(router)
stack.Install(receiver)

addr = ns.Ipv4AddressHelper()
sender_ifs = []
for i in range(2):
    devs = p2p.Install(senders.Get(i), router.Get(0))
    addr.SetBase(ns.Ipv4Address(f"10.1.{i + 1}.0"), ns.Ipv4Mask("255.255.255.0"))
    sender_ifs.append(addr.Assign(devs))
bottleneck = p2p.Install(router.Get(0), receiver.Get(0))
tch = ns.TrafficControlHelper()
tch.SetRootQueueDisc(
    "ns3::TbfQueueDisc",
    "Rate", ns.DataRateValue(ns.DataRate("10Mbps")),
    "Burst", ns.UintegerValue(50 * 1024),
    "Mtu", ns.UintegerValue(1500),
    "MaxSize", ns.QueueSizeValue(ns.QueueSize("2p")),
)
tch.Install(bottleneck.Get(0))
addr.SetBase(ns.Ipv4Address("10.2.1.0"), ns.Ipv4Mask("255.255.255.0"))
recv_if = addr.Assign(bottleneck)
ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

ccs = ["ns3::TcpBbr", "ns3::TcpCubic"]
sinks = []
for i, cc in enumerate(ccs):
    node_id = senders.Get(i).GetId()
    ns.Config.Set(f"/NodeList/{node_id}/$ns3::TcpL4Protocol/SocketType", ns.TypeIdValue(ns.TypeId.LookupByName(cc)))
    port = 5000 + i
    sink_helper = ns.PacketSinkHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
    sink_app = sink_helper.Install(receiver.Get(0))
    sink_app.Start(ns.Seconds(0))
    sinks.append(sink_app.Get(0))
    src = ns.BulkSendHelper("ns3::TcpSocketFactory", ns.InetSocketAddress(recv_if.GetAddress(1), port).ConvertTo())
    src.SetAttribute("MaxBytes", ns.UintegerValue(0))
    app = src.Install(senders.Get(i))
    app.Start(ns.Seconds(0))

ns.Simulator.Stop(ns.Seconds(DURATION))
t0 = time.perf_counter()
ns.Simulator.Run()
wall = time.perf_counter() - t0
rx = [ns.DynamicCast[ns.PacketSink](s).GetTotalRx() for s in sinks]
ns.Simulator.Destroy()
print(json.dumps({
    "wall_seconds": wall,
    "goodput_bps": {"bbr": rx[0] * 8 / DURATION, "cubic": rx[1] * 8 / DURATION},
}))
