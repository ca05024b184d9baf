#!/usr/bin/env python3
"""An OTLP trace receiver for stratum's tests.

Decodes what it receives with the OpenTelemetry project's own protobuf
definitions (PyPI's opentelemetry-proto), over OTLP/HTTP (http/protobuf,
POST /v1/traces) or OTLP/gRPC (TraceService/Export, with grpcio).

    receiver.py http|grpc PORTFILE OUT

Listens on 127.0.0.1 (a free port, written to PORTFILE once it listens)
and appends one JSON object per span to OUT: traceId, spanId,
parentSpanId (hex), name, kind, status (its code: 0 unset, 1 ok,
2 error), attributes (as strings) and the resource's service.name.
Runs until killed.
"""

import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    return "" if kind is None else str(getattr(v, kind))


def record(request, out):
    lines = []
    for rs in request.resource_spans:
        resource = {a.key: value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                lines.append(json.dumps({
                    "traceId": s.trace_id.hex(),
                    "spanId": s.span_id.hex(),
                    "parentSpanId": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": s.kind,
                    "status": s.status.code,
                    "attributes": {a.key: value(a.value) for a in s.attributes},
                    "service": resource.get("service.name", ""),
                }))
    with LOCK, open(out, "a", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def serve_http(port_file, out):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            if self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(415)
                self.end_headers()
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            record(request, out)
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    announce(port_file, server.server_address[1])
    server.serve_forever()


def serve_grpc(port_file, out):
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            record(request, out)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    announce(port_file, port)
    server.wait_for_termination()


def announce(port_file, port):
    with open(port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(port))
    import os
    os.rename(port_file + ".tmp", port_file)


if __name__ == "__main__":
    mode, port_file, out = sys.argv[1:4]
    {"http": serve_http, "grpc": serve_grpc}[mode](port_file, out)
