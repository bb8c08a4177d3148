// The JGroups side of bench/peers.py: one sender or one receiver process of a
// JGroups 2.12 group with the library's default stack (udp.xml, inside jgroups.jar:
// `new JChannel()`), so that m2mc is compared with JGroups as it ships; with
// -Dpeers.stack=FILE, the stack in FILE (bench/peers.py writes udp.xml plus SEQUENCER
// there for total order).
//
// Compiled by bench/peers.py with javac into a temporary directory; never committed
// as classes. Addresses come from the system properties bench/peers.py sets
// (-Djgroups.bind_addr=127.0.0.1, -Djgroups.udp.mcast_addr=239.255.x.y, ...).
//
//   java PeersJGroups clock                               one System.nanoTime() line
//   java PeersJGroups recv COUNT IDLE_S CAP_S WARMUP      count deliveries; latency if stamped
//   java PeersJGroups send COUNT SIZE MEMBERS RATE [TICK] RATE 0: as fast as it can
//
// Times are System.nanoTime() (CLOCK_MONOTONIC on Linux, one clock for every process
// of the machine, like Python's time.monotonic_ns()). A paced sender (RATE > 0)
// stamps each message: its send time (8 bytes) and its number (4 bytes) at the front;
// ahead of its schedule it parks at least TICK seconds (0: just until the next message
// is due), then sends what came due meanwhile (bench/peers_roles.py does the same).
// A receiver gives up IDLE_S seconds after its last delivery or CAP_S after its first.
// A receiver prints one JSON line on stdout, a sender one when it starts and one when
// it has sent everything; then each waits for stdin to close.

import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.jgroups.JChannel;
import org.jgroups.Message;
import org.jgroups.ReceiverAdapter;
import org.jgroups.View;

public final class PeersJGroups {
    private static final String CLUSTER = "m2mc-peers-bench";

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "clock" -> System.out.println(System.nanoTime());
            case "recv" -> receive(Long.parseLong(args[1]), Double.parseDouble(args[2]),
                                   Double.parseDouble(args[3]), Long.parseLong(args[4]));
            case "send" -> send(Long.parseLong(args[1]), Integer.parseInt(args[2]),
                                Integer.parseInt(args[3]), Double.parseDouble(args[4]),
                                args.length > 5 ? Double.parseDouble(args[5]) : 0.0);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    /** The default stack (udp.xml in jgroups.jar), or the file -Dpeers.stack names. */
    static JChannel channel() throws Exception {
        String stack = System.getProperty("peers.stack");
        return stack == null ? new JChannel() : new JChannel(stack);
    }

    /** Count deliveries until COUNT, or IDLE_S seconds without one after the first. */
    static void receive(long count, double idleS, double capS, long warmup) throws Exception {
        AtomicLong received = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        long[] latencies = new long[(int) count];
        AtomicLong stamped = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        JChannel channel = channel();
        channel.setReceiver(new ReceiverAdapter() {
            @Override
            public void receive(Message msg) {
                long now = System.nanoTime();
                if (msg.getLength() >= 12) {
                    ByteBuffer head = ByteBuffer.wrap(msg.getRawBuffer(), msg.getOffset(), 12);
                    long sent = head.getLong();
                    int index = head.getInt();
                    if (sent != 0 && index >= warmup && index < latencies.length) {
                        latencies[index] = now - sent;
                        stamped.incrementAndGet();
                    }
                }
                last.set(now);
                first.compareAndSet(0, now);
                if (received.incrementAndGet() >= count) {
                    done.countDown();
                }
            }
        });
        channel.connect(CLUSTER);
        System.err.println("ready");
        System.err.flush();
        long idleNs = (long) (idleS * 1e9);
        long capNs = (long) (capS * 1e9);
        while (!done.await(100, TimeUnit.MILLISECONDS)) {
            long at = last.get();
            long now = System.nanoTime();
            if (at != 0 && (now - at > idleNs || now - first.get() > capNs)) {
                break;  // gave up: the trial does not count
            }
            if (at == 0 && startTimedOut(idleNs)) {
                break;
            }
        }
        long got = received.get();
        StringBuilder out = new StringBuilder();
        out.append("{\"received\": ").append(got)
           .append(", \"first\": ").append(first.get())
           .append(", \"last\": ").append(last.get());
        if (stamped.get() > 0) {
            long[] lat = Arrays.stream(latencies).filter(v -> v > 0).sorted().toArray();
            out.append(", \"latency_ns\": {\"n\": ").append(lat.length)
               .append(", \"p50\": ").append(rank(lat, 0.50))
               .append(", \"p99\": ").append(rank(lat, 0.99))
               .append(", \"max\": ").append(lat.length > 0 ? lat[lat.length - 1] : 0)
               .append("}");
        }
        out.append("}");
        System.out.println(out);
        System.out.flush();
        waitForStdinToClose();
        Runtime.getRuntime().halt(0);
    }

    private static long started = System.nanoTime();

    /** No first message within 4 idle periods of the start (the sender never came). */
    private static boolean startTimedOut(long idleNs) {
        return System.nanoTime() - started > 4 * idleNs;
    }

    /** The nearest-rank percentile of sorted values (as bench/peers.py computes it). */
    static long rank(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(i, sorted.length - 1))];
    }

    /** Send COUNT messages of SIZE bytes once MEMBERS are in the view; RATE msg/s if > 0,
     *  parking at least TICK seconds when ahead. */
    static void send(long count, int size, int members, double rate, double tick)
            throws Exception {
        long tickNs = (long) (tick * 1e9);
        JChannel channel = channel();
        channel.setReceiver(new ReceiverAdapter() {
            @Override
            public void receive(Message msg) {
                // The sender's own copies come back (JGroups' default): not read.
            }
        });
        channel.connect(CLUSTER);
        long deadline = System.nanoTime() + 60_000_000_000L;
        View view = channel.getView();
        while ((view == null || view.size() < members) && System.nanoTime() < deadline) {
            Thread.sleep(20);
            view = channel.getView();
        }
        int seen = view == null ? 0 : view.size();
        Thread.sleep(200);
        byte[] payload = new byte[size];
        new java.util.Random().nextBytes(payload);
        if (size >= 12) {
            Arrays.fill(payload, 0, 12, (byte) 0);  // unstamped: a receiver measures no latency
        }
        long start = System.nanoTime();
        System.out.println("{\"start\": " + start + ", \"members\": " + seen + "}");
        System.out.flush();
        long interval = rate > 0 ? (long) (1e9 / rate) : 0;
        for (long i = 0; i < count; i++) {
            byte[] body = payload;
            if (interval > 0) {
                long target = start + i * interval;
                long wait = target - System.nanoTime();
                if (wait > 0) {
                    LockSupport.parkNanos(Math.max(wait, tickNs));
                }
                body = payload.clone();
                ByteBuffer.wrap(body, 0, 12).putLong(System.nanoTime()).putInt((int) i);
            }
            channel.send(new Message(null, null, body));
        }
        long end = System.nanoTime();
        System.out.println("{\"start\": " + start + ", \"end\": " + end + ", \"members\": " + seen
                           + "}");
        System.out.flush();
        waitForStdinToClose();
        Runtime.getRuntime().halt(0);
    }

    /** Stay in the group (answering retransmissions) until bench/peers.py closes stdin. */
    static void waitForStdinToClose() throws Exception {
        InputStream in = System.in;
        byte[] buffer = new byte[256];
        while (in.read(buffer) >= 0) {
            // nothing: the orchestrator only closes it
        }
    }
}
