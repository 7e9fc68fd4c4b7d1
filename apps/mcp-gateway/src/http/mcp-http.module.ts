import { JsonLogger } from '@cairn/service-kit';
import { Module } from '@nestjs/common';
import type { DynamicModule } from '@nestjs/common';
import type { McpGatewayConfig } from '../mcp-gateway.config.js';
import { MCP_CONFIG } from './mcp-http.tokens.js';
import { McpController } from './mcp.controller.js';
import { McpSessions } from './mcp-sessions.js';

export interface McpHttpResources {
  config: McpGatewayConfig;
  sessions: McpSessions;
  logger: JsonLogger;
}

/** The HTTP wiring only: the sessions and logger come in ready from `startMcpHttp`. */
@Module({})
export class McpHttpModule {
  static forRoot(resources: McpHttpResources): DynamicModule {
    return {
      module: McpHttpModule,
      controllers: [McpController],
      providers: [
        { provide: MCP_CONFIG, useValue: resources.config },
        { provide: McpSessions, useValue: resources.sessions },
        { provide: JsonLogger, useValue: resources.logger },
      ],
    };
  }
}
