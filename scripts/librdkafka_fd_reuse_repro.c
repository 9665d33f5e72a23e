/* What made librdkafka's 0077_compaction fail once in a full run: 0076_produce_retry's interceptor
 * close()s its producer's socket fd under librdkafka, and a consumer created right then in the same
 * process (0077, a parallel test of the one test-runner) takes that fd number for a wake-up pipe. The
 * producer then fails with "Receive failed: Socket operation on non-socket" and closes the fd again;
 * when the consumer's group-coordinator socket gets the number, its thread drains the socket as
 * wake-up bytes and every answer is lost: "GroupCoordinator/0: Timed out ApiVersionRequest in flight
 * (after 10013ms)", on each reconnect. With `noclose` (the same steps, nothing closed) the consumer
 * reaches the partition's end. It hits in some runs only (the fd numbers and timing vary): 4 of 20 here, 0 of 7 with noclose.
 *
 *   gcc -I$LRK/src scripts/librdkafka_fd_reuse_repro.c -L$LRK/src -lrdkafka -o /tmp/fd_reuse_repro
 *   LD_LIBRARY_PATH=$LRK/src /tmp/fd_reuse_repro 127.0.0.1:PORT some-new-topic [noclose]
 *
 * exits 1 when the consumer got nothing in 25 s. Against a broker with LOGSOURCE_LOG_LEVEL=DEBUG, the
 * broker's log shows each of those ApiVersions requests (key 18) answered at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include "rdkafka.h"

static const char *bootstrap, *topic;
static int do_close = 1, closed_fd = -1;
static rd_kafka_t *consumer;

static rd_kafka_t *new_consumer(void) {
        char errstr[256];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        char group[64];
        snprintf(group, sizeof(group), "repro-%ld", (long)time(NULL));
        rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, NULL, 0);
        rd_kafka_conf_set(conf, "group.id", group, NULL, 0);
        rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", NULL, 0);
        rd_kafka_conf_set(conf, "enable.partition.eof", "true", NULL, 0);
        rd_kafka_t *c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
        if (!c) {
                fprintf(stderr, "consumer: %s\n", errstr);
                exit(2);
        }
        return c;
}

static rd_kafka_resp_err_t on_request_sent(rd_kafka_t *rk, int sockfd, const char *brokername,
                                           int32_t brokerid, int16_t ApiKey, int16_t ApiVersion,
                                           int32_t CorrId, size_t size, void *ic_opaque) {
        if (ApiKey != 0 || closed_fd != -1)
                return RD_KAFKA_RESP_ERR_NO_ERROR;
        closed_fd = sockfd;
        if (do_close) {
                fprintf(stderr, "closing the producer's socket fd %d (as 0076 does)\n", sockfd);
                close(sockfd);
        }
        /* the parallel test creates its consumer right now */
        consumer = new_consumer();
        return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static rd_kafka_resp_err_t on_new(rd_kafka_t *rk, const rd_kafka_conf_t *conf, void *o, char *e,
                                  size_t es) {
        return rd_kafka_interceptor_add_on_request_sent(rk, "close", on_request_sent, NULL);
}

int main(int argc, char **argv) {
        char errstr[256];
        bootstrap = argv[1];
        topic = argv[2];
        if (argc > 3 && !strcmp(argv[3], "noclose"))
                do_close = 0;
        rd_kafka_conf_t *conf = rd_kafka_conf_new();
        rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, NULL, 0);
        rd_kafka_conf_set(conf, "socket.timeout.ms", "3000", NULL, 0);
        rd_kafka_conf_set(conf, "message.timeout.ms", "5000", NULL, 0);
        rd_kafka_conf_interceptor_add_on_new(conf, "close", on_new, NULL);
        rd_kafka_t *p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        rd_kafka_producev(p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE("x", 1), RD_KAFKA_V_END);
        rd_kafka_flush(p, 8000);
        if (!consumer) {
                fprintf(stderr, "no produce request seen\n");
                return 2;
        }
        rd_kafka_poll_set_consumer(consumer);
        rd_kafka_topic_partition_list_t *t = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(t, topic, RD_KAFKA_PARTITION_UA);
        rd_kafka_subscribe(consumer, t);
        rd_kafka_topic_partition_list_destroy(t);
        time_t end = time(NULL) + 25;
        int eofs = 0;
        while (time(NULL) < end && !eofs) {
                rd_kafka_message_t *m = rd_kafka_consumer_poll(consumer, 500);
                if (!m)
                        continue;
                if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF)
                        eofs++;
                rd_kafka_message_destroy(m);
        }
        printf("%s: consumer %s (fd %d closed under the producer)\n", do_close ? "close" : "noclose",
               eofs ? "got to a partition's end" : "got NOTHING in 25 s", closed_fd);
        rd_kafka_consumer_close(consumer);
        rd_kafka_destroy(consumer);
        rd_kafka_destroy(p);
        return eofs ? 0 : 1;
}
