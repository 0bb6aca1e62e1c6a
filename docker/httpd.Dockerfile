# httpd: the static HTTP server as an image FROM scratch — one static binary. It serves a
# local directory (scenario B) or an NFS export through its built-in NFSv3 client
# (scenario A), so it needs no kernel NFS mount and no privileges either way.
#
#   docker run -d -p 8080:8080 -v ~/www:/www:ro httpd --root /www
#   docker run -d -p 8080:8080 httpd --nfs nfs://nfs-server/nfs-share
FROM scratch
COPY httpd /httpd
ENV HTTPD_LISTEN=0.0.0.0:8080 \
    HTTPD_METRICS=0.0.0.0:9101
EXPOSE 8080/tcp
# Prometheus text at /metrics, JSON at /metrics.json.
EXPOSE 9101/tcp
USER 65534:65534
HEALTHCHECK --interval=10s --timeout=3s --start-period=2s --retries=3 \
    CMD ["/httpd", "--healthcheck"]
ENTRYPOINT ["/httpd"]
