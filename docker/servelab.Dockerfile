# servelab: the load generator (and `tcp-server`, `report`) as an image FROM scratch —
# one static binary. Results go to a mounted directory as JSON, to be merged exactly with
# `servelab report --merge`.
#
#   docker run --rm --network lab -v "$PWD/results:/results" servelab \
#     load http://httpd-a:8080/testfile.bin -n 100 -c 10 --json /results/a.json
FROM scratch
COPY servelab /servelab
# `servelab tcp-server` listens here (the bridge vs host-network TCP comparison).
EXPOSE 5201/tcp
USER 65534:65534
ENTRYPOINT ["/servelab"]
