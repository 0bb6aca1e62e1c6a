# httpd: the static HTTP server as an image FROM scratch — one static binary. It serves a
# local directory (scenario B) or an NFS export through its built-in NFSv3 client
# (scenario A), so it needs no kernel NFS mount and no privileges either way.
#
#   docker run -d -p 8080:8080 -v ~/www:/www:ro httpd --root /www
#   docker run -d -p 8080:8080 -v ~/www:/www:ro -e HTTPD_ROOT=/www httpd   # the same
#   docker run -d --network lab -p 8080:8080 httpd --nfs nfs://rustnfs/nfs-share
FROM scratch
COPY httpd /httpd
# Every flag has an HTTPD_* variable (HTTPD_ROOT, HTTPD_NFS, HTTPD_ACCESS_LOG, HTTPD_WORKERS,
# ...); a flag given after the image name wins over its variable.
ENV HTTPD_LISTEN=0.0.0.0:8080 \
    HTTPD_METRICS=0.0.0.0:9101
EXPOSE 8080/tcp
# Prometheus text at /metrics, JSON at /metrics.json.
EXPOSE 9101/tcp
USER 65534:65534
# The binary probes itself: `HEAD /` on HTTPD_LISTEN (0.0.0.0 is probed on 127.0.0.1),
# exit 0 on any HTTP answer within 3 s.
HEALTHCHECK --interval=5s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/httpd", "--healthcheck"]
ENTRYPOINT ["/httpd"]
