// gRPC reflection v1 (server/daemon/reflection_v1.h) through the real daemon and a client written
// against the v1 protocol, as grpcurl asks first: list_services names our service, the file of
// transposed.v1.Transposer comes with the service and its imports, a second request of the same
// file on the stream still carries it, and an unknown symbol is NOT_FOUND.
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "testing/daemon_process.h"

namespace transposed {
namespace {

namespace rv1 = grpc::reflection::v1;

TEST(ReflectionV1Test, ListsOurServicesAndTheirFiles) {
  testing::DaemonOptions options;
  options.binary = TRANSPOSED_DAEMON;
  testing::DaemonProcess d(options);
  ASSERT_TRUE(d.Start().ok());
  auto stub = rv1::ServerReflection::NewStub(
      grpc::CreateChannel(d.address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stream = stub->ServerReflectionInfo(&ctx);
  auto ask = [&](const rv1::ServerReflectionRequest& q) {
    rv1::ServerReflectionResponse r;
    EXPECT_TRUE(stream->Write(q));
    EXPECT_TRUE(stream->Read(&r));
    return r;
  };

  rv1::ServerReflectionRequest list;
  list.set_list_services("");
  const rv1::ServerReflectionResponse listed = ask(list);
  ASSERT_TRUE(listed.has_list_services_response()) << listed.DebugString();
  std::set<std::string> names;
  for (const auto& s : listed.list_services_response().service()) names.insert(s.name());
  EXPECT_EQ(names.count("transposed.v1.Transposer"), 1u) << listed.DebugString();
  EXPECT_EQ(names.count("grpc.reflection.v1.ServerReflection"), 1u) << listed.DebugString();
  EXPECT_EQ(names.count("grpc.health.v1.Health"), 1u) << listed.DebugString();

  for (int round = 0; round < 2; ++round) {
    rv1::ServerReflectionRequest symbol;
    symbol.set_file_containing_symbol("transposed.v1.Transposer");
    const rv1::ServerReflectionResponse files = ask(symbol);
    ASSERT_TRUE(files.has_file_descriptor_response()) << files.DebugString();
    ASSERT_GE(files.file_descriptor_response().file_descriptor_proto_size(), 1);
    google::protobuf::FileDescriptorProto first;
    ASSERT_TRUE(first.ParseFromString(files.file_descriptor_response().file_descriptor_proto(0)));
    EXPECT_EQ(first.name(), "transposed/v1/transposed.proto");
    ASSERT_GE(first.service_size(), 1);
    EXPECT_EQ(first.service(0).name(), "Transposer");
    EXPECT_EQ(files.original_request().file_containing_symbol(), "transposed.v1.Transposer");
  }

  rv1::ServerReflectionRequest unknown;
  unknown.set_file_containing_symbol("no.such.Service");
  const rv1::ServerReflectionResponse missing = ask(unknown);
  ASSERT_TRUE(missing.has_error_response()) << missing.DebugString();
  EXPECT_EQ(missing.error_response().error_code(), static_cast<int>(grpc::StatusCode::NOT_FOUND));

  EXPECT_TRUE(stream->WritesDone());
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_TRUE(d.Stop().ok());
  if (!::testing::Test::HasFailure()) d.RemoveDir();
}

}  // namespace
}  // namespace transposed
