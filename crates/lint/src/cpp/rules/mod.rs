//! The C++/CUDA rules (KG60x-KG61x), a module per family with its registry entries beside
//! its checks. The walk over the tree is `cpp::Analyzer`'s; it only dispatches here.

pub(crate) mod caching;
pub(crate) mod concurrency;
pub(crate) mod decoy;
pub(crate) mod hooks;
pub(crate) mod input_mutation;
pub(crate) mod precision;
pub(crate) mod sources;
pub(crate) mod tampering;
pub(crate) mod torch_op;
