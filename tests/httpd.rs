//! End-to-end tests of httpd (being written).
