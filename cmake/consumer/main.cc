// A batch job outside the tree: asks the daemon at argv[1] for a problem's configuration with the
// installed client, and checks the kernel library knows the answer (for a CUDA answer, the
// configuration must be valid for the problem). Prints the answer, exits 0 on success.
#include <cstdio>
#include <string>

#include <transposed/client/client.h>
#include <transposed/kernels/config.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: consumer HOST:PORT\n");
    return 2;
  }
  auto client = transposed::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::fprintf(stderr, "connect: %s\n", client.status().ToString().c_str());
    return 1;
  }
  transposed::Problem problem;
  problem.rows = 96;
  problem.cols = 160;
  problem.dtype = transposed::DType::kF32;
  auto answer = (*client)->GetConfig(problem);
  if (!answer.ok()) {
    std::fprintf(stderr, "GetConfig: %s\n", answer.status().ToString().c_str());
    return 1;
  }
  const auto configs = transposed::kernels::EnumerateConfigs(problem);
  if (configs.empty()) {
    std::fprintf(stderr, "the kernel library has no configuration for %s\n",
                 problem.ToString().c_str());
    return 1;
  }
  if (answer->variant().backend() == "cuda") {
    auto config = transposed::kernels::TransposeConfig::FromParams(
        transposed::VariantParams(answer->variant()));
    if (!config.ok() || !transposed::kernels::CheckConfig(*config, problem).ok()) {
      std::fprintf(stderr, "the daemon's answer %s is not a valid configuration\n",
                   answer->variant().name().c_str());
      return 1;
    }
  }
  std::printf("consumer: %s -> %s (%s backend, %.1f GB/s, source %d); %zu kernel configurations\n",
              problem.ToString().c_str(), answer->variant().name().c_str(),
              answer->variant().backend().c_str(), answer->gbps(),
              static_cast<int>(answer->source()), configs.size());
  return 0;
}
