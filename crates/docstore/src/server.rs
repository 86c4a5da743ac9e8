//! TCP listener and per-connection loop: read a frame, dispatch the command, write the reply.
//! STUB: replaced by the wire module work.

use crate::config::Config;
use crate::error::Result;
use std::net::SocketAddr;

pub struct Server;

pub struct ServerHandle {
    local_addr: SocketAddr,
}

impl Server {
    pub async fn start(_config: Config) -> Result<ServerHandle> {
        Err(crate::error::Error::not_supported("the server"))
    }
}

impl ServerHandle {
    /// `mongodb://host:port/` for the driver.
    pub fn uri(&self) -> String {
        format!("mongodb://{}/", self.local_addr)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub async fn shutdown(self) {}
}
