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
# No HEALTHCHECK: a scratch image has no shell or curl, and a Docker healthcheck must exec a
# program inside the image. It needs a probe mode in the binary (`httpd --healthcheck`
# connecting to its own port); until then use the orchestrator's TCP/HTTP probes
# (docker/k8s/*.yaml) or `servelab load` from outside.
ENTRYPOINT ["/httpd"]
