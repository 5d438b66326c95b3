//===- Targets.cpp - the --target names and what they build ----------------===//
#include "spark/Targets/Arm64.h"
#include "spark/Targets/Hexagon.h"
#include "spark/Targets/X86.h"

namespace spark {

std::vector<MicrokernelArg>
attentionMicrokernelArguments(const KernelSpec &spec) {
  using A = MicrokernelArg;
  std::vector<A> args = {A::of(0), A::of(1), A::of(2), A::of(3), A::of(4)};
  int64_t next = 5;
  args.push_back(spec.gated ? A::of(next++) : A::null());
  for (int i = 0; i < 3; ++i) // pos0, cached, out
    args.push_back(A::of(next++));
  args.push_back(A::f32(spec.scale));
  args.push_back(A::i32(spec.window));
  args.push_back(A::i32(spec.ring ? 1 : 0));
  return args;
}

const char *knownTargets() { return "host, spr, arm64, hexagon or s25"; }

namespace {

llvm::Expected<TargetInfo> withMicrokernels(TargetKind kind,
                                            AmxKernel amxKernel) {
  if (kind == TargetKind::Host || kind == TargetKind::Spr)
    return x86Target(kind, amxKernel);
  if (kind == TargetKind::Arm64) {
    TargetInfo target = arm64Target();
    if (target.cc.empty())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--target=arm64 needs the AArch64 cross compiler "
          "aarch64-linux-gnu-gcc, which this spark-compile was built without "
          "(apt-get install gcc-aarch64-linux-gnu, then reconfigure)");
    return target;
  }
  if (kind == TargetKind::Hexagon) {
    TargetInfo target = hexagonTarget();
    if (std::string(SPARK_HEXAGON_LD).empty())
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "--target=hexagon needs lld (ld.lld), which this spark-compile was "
          "built without (apt-get install lld-22, then reconfigure)");
    return target;
  }
  return llvm::createStringError(
      "--target=s25 is a bundle of an arm64 and a hexagon library, not one "
      "target (spark::buildS25Bundle builds it)");
}

} // namespace

llvm::Expected<TargetInfo> targetFor(TargetKind kind, AmxKernel amxKernel,
                                     HalideKernels halideKernels) {
  llvm::Expected<TargetInfo> target = withMicrokernels(kind, amxKernel);
  if (!target || halideKernels == HalideKernels::None)
    return target;
  if (kind != TargetKind::Arm64 && kind != TargetKind::Hexagon)
    return llvm::createStringError(
        "--halide-kernels applies to --target=arm64, hexagon or s25, whose "
        "every kernel Halide also compiles; the x86 variants with dot "
        "products have only hand-written matrix kernels");
  if (halideKernels == HalideKernels::Attention) {
    auto microkernelFor = target->microkernelFor;
    auto compilesKernel = target->compilesKernel;
    target->microkernelFor =
        [microkernelFor](const TargetVariant &variant,
                         const KernelSpec &spec) -> const Microkernel * {
      return spec.kind == KernelKind::Attention ? nullptr
                                                : microkernelFor(variant, spec);
    };
    target->compilesKernel = [compilesKernel](const TargetVariant &variant,
                                              const KernelSpec &spec) {
      return spec.kind == KernelKind::Attention ||
             compilesKernel(variant, spec);
    };
    return target;
  }
  target->microkernelFor = [](const TargetVariant &,
                              const KernelSpec &) -> const Microkernel * {
    return nullptr;
  };
  target->compilesKernel = [](const TargetVariant &, const KernelSpec &) {
    return true;
  };
  return target;
}

} // namespace spark
